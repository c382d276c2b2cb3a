// Event-loop lag: how late a 50 ms timer fires is how long the thread that serves every request
// was busy with something else. Kept for the last minute, so /metrics can say p99 and max
// (the hostile-content tests and bench read them: parsing pushed bytes must never show here).
const TICK_MS = 50;
const WINDOW = (60 * 1000) / TICK_MS;

export class EventLoopLag {
  private readonly samples = new Float64Array(WINDOW);
  private filled = 0;
  private at = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private last = 0;

  start(): void {
    if (this.timer !== undefined) return;
    this.last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      this.record(Math.max(0, now - this.last - TICK_MS) / 1000);
      this.last = now;
    }, TICK_MS);
    Deno.unrefTimer(this.timer as unknown as number);
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One observation, in seconds (the timer's own; tests feed it directly). */
  record(seconds: number): void {
    this.samples[this.at] = seconds;
    this.at = (this.at + 1) % WINDOW;
    this.filled = Math.min(WINDOW, this.filled + 1);
  }

  /** p99 and max of the last minute, in seconds. */
  summary(): { p99: number; max: number } {
    if (this.filled === 0) return { p99: 0, max: 0 };
    const s = this.samples.slice(0, this.filled).sort();
    return { p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))], max: s[s.length - 1] };
  }
}
