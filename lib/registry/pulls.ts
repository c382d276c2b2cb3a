// Pull history (SPEC §Pull history entry, §Pulls listing): recording on manifest GET and the
// paged listing. Recording never fails or delays a pull: blind KV writes (no read, no conflict),
// not awaited by the response, gathered into one commit per short window; errors only logged.
import type { Config } from "../config/mod.ts";
import type { PullMeta, PullRecord } from "../metadata/mod.ts";
import { log } from "../log.ts";

export interface PullsPage {
  target: string;
  max_pulls: number;
  max_age_secs?: number;
  entries: { client: string; at: string }[];
  next?: number;
}

/** Default and largest page of the pulls listing; a larger `n` is served in pages of this. */
export const PULLS_DEFAULT_N = 100;
export const PULLS_MAX_N = 1000;
const MAX_QUEUED = 10_000;
/** how long a recorded pull may wait to share a commit (lost on a crash: history only) */
const WRITE_WINDOW_MS = 20;

export class Pulls {
  /** Pulls not yet handed to KV; written together once the window closes. */
  private queue: PullRecord[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private draining: Promise<void> | null = null;
  private overflow = 0;

  constructor(private readonly cfg: Config, private readonly meta: PullMeta) {}

  get enabled(): boolean {
    return this.cfg.global.updatePullTime;
  }

  /** Records a pull of `target` (the tag or digest the GET addressed) resolving to `digest`. */
  record(ns: string, target: string, digest: string, client: string): void {
    if (!this.enabled) return;
    if (this.queue.length >= MAX_QUEUED) {
      // KV is not keeping up: history is best effort, memory is not.
      this.overflow++;
      return;
    }
    this.queue.push({ ns, target, digest, client, at: Date.now() });
    if (this.draining === null) this.arm();
  }

  /**
   * Writes what is queued now. A KV commit costs ~0.6 ms here (fsync) and reads queue behind
   * it, so one commit per pull added ~500 µs to every sequential pull; gathered for a short
   * window, a pull costs ~12-15 µs of commit time.
   */
  private flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.draining ??= this.drain();
    return this.draining;
  }

  private async drain(): Promise<void> {
    await null; // `draining` is assigned before this can finish
    const batch = this.queue;
    this.queue = [];
    try {
      await this.meta.recordMany(batch);
    } catch (e) {
      log.warn("pulls not recorded", { count: batch.length, error: String(e) });
    }
    this.draining = null;
    if (this.overflow > 0) {
      log.warn("pulls not recorded: queue full", { count: this.overflow });
      this.overflow = 0;
    }
    // Pulls that arrived meanwhile wait for their own window, not for the next commit alone.
    if (this.queue.length > 0) this.arm();
  }

  private arm(): void {
    if (this.timer !== null) return;
    const t = setTimeout(() => this.flush(), WRITE_WINDOW_MS);
    Deno.unrefTimer(t);
    this.timer = t;
  }

  /** Writes every pull recorded so far now (a listing reads its own pulls; shutdown). */
  async settled(): Promise<void> {
    while (this.queue.length > 0 || this.draining) await this.flush();
  }

  async list(ns: string, target: string, offset: number, n: number): Promise<PullsPage> {
    const out: PullsPage = { target, max_pulls: this.cfg.global.maxPulls, entries: [] };
    if (this.cfg.global.maxAgeSecs !== null) out.max_age_secs = this.cfg.global.maxAgeSecs;
    if (!this.enabled || n === 0) return out;
    await this.settled();
    const page = await this.meta.page(ns, target, offset, Math.min(n, PULLS_MAX_N));
    out.entries = page.entries.map((e) => ({ client: e.client, at: new Date(e.at).toISOString() }));
    if (page.more) out.next = offset + page.entries.length;
    return out;
  }
}
