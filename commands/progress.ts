// How the long one-shot commands (sync, reindex, scan, scrub, advisories fetch, prune) show their
// progress while they work and end with a summary line. lib/ reports through a ProgressSink
// (lib/jobs/progress.ts); this renders it, in one of four modes:
// - terminal (standard output is one): one line rewritten in place (\r), at most 4 times a
//   second: done/total, bytes where bytes move, rate, time left;
// - lines (standard output is a file or a pipe): the same line printed on its own every 10 s, so
//   a log shows the run moving without a flood;
// - quiet (--quiet): nothing but the summary and errors;
// - json (--json): one JSON object per line: `progress` events (the first at once, then at most
//   one a second and one per phase change), `line` for what the command prints per item,
//   `result` for a part's own summary (a sync entry, an ecosystem) and a last `summary` object
//   with the summary line, the counts and the elapsed time.
// WHARF_PROGRESS_INTERVAL_SECS sets the interval of every mode (0: every step). Errors always go
// to standard error as plain lines.
import type { ProgressSink, ProgressUpdate } from "../lib/jobs/mod.ts";

export type ProgressMode = "terminal" | "lines" | "quiet" | "json";

/** Plain lines, by default: at most one per this. */
export const LINES_EVERY_MS = 10_000;
/** JSON progress events, by default: at most one per this. */
export const JSON_EVERY_MS = 1_000;
/** The terminal line: at most one redraw per this. */
export const REDRAW_EVERY_MS = 250;
/** Rates are measured over the last this-long of the current phase. */
const RATE_WINDOW_MS = 10_000;
/** A time left is guessed only after this long into a phase. */
const ETA_AFTER_MS = 1_000;

export interface ReporterOptions {
  mode: ProgressMode;
  /** standard output, as is (no newline added) */
  out?: (s: string) => void;
  /** standard error, one line (newline added) */
  err?: (line: string) => void;
  /** ms; performance.now by default */
  now?: () => number;
  /** the terminal line, plain lines and JSON events at most once per this (ms) */
  intervalMs?: number;
  /** the terminal's width, for the in-place line */
  columns?: () => number;
}

const enc = new TextEncoder();

/** The mode a command's flags and standard output ask for. */
export function progressMode(
  flags: { quiet: boolean; json: boolean },
  terminal: boolean = Deno.stdout.isTerminal(),
): ProgressMode {
  return flags.json ? "json" : flags.quiet ? "quiet" : terminal ? "terminal" : "lines";
}

/** A reporter for `command` on this process's standard output and error. */
export function reporterFor(command: string, flags: { quiet: boolean; json: boolean }): Reporter {
  const mode = progressMode(flags);
  const secs = Number(Deno.env.get("WHARF_PROGRESS_INTERVAL_SECS") ?? "");
  return new Reporter(command, {
    mode,
    intervalMs: Number.isFinite(secs) && secs >= 0 && Deno.env.has("WHARF_PROGRESS_INTERVAL_SECS")
      ? secs * 1000
      : undefined,
  });
}

interface Sample {
  t: number;
  done: number;
  bytes: number;
}

export class Reporter {
  private readonly out: (s: string) => void;
  private readonly err: (line: string) => void;
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly columns: () => number;
  private readonly t0: number;
  private last: ProgressUpdate | null = null;
  private phaseKey = "";
  private phaseStart = 0;
  private samples: Sample[] = [];
  /** when the last line, event or redraw went out */
  private shownAt = -Infinity;
  /** the terminal line now on screen ("" when none) */
  private shown = "";
  private ended = false;

  constructor(readonly command: string, private readonly opts: ReporterOptions) {
    this.out = opts.out ?? ((s) => Deno.stdout.writeSync(enc.encode(s)));
    this.err = opts.err ?? ((l) => console.error(l));
    this.now = opts.now ?? (() => performance.now());
    this.intervalMs = opts.intervalMs ??
      (opts.mode === "json"
        ? JSON_EVERY_MS
        : opts.mode === "lines"
        ? LINES_EVERY_MS
        : REDRAW_EVERY_MS);
    this.columns = opts.columns ?? terminalColumns;
    this.t0 = this.now();
    // Plain lines start one interval in: a quick run prints its summary only.
    if (opts.mode === "lines") this.shownAt = this.t0;
  }

  get mode(): ProgressMode {
    return this.opts.mode;
  }

  /** What lib/ reports through (cheap: most calls only update figures). */
  readonly sink: ProgressSink = (u) => this.update(u);

  update(u: ProgressUpdate): void {
    if (this.ended || this.opts.mode === "quiet") return;
    const t = this.now();
    const key = `${u.phase ?? ""}\0${u.unit}`;
    const changed = key !== this.phaseKey;
    if (changed) {
      this.phaseKey = key;
      this.phaseStart = t;
      this.samples = [];
    }
    this.last = u;
    this.samples.push({ t, done: u.done, bytes: u.bytes ?? 0 });
    while (this.samples.length > 2 && t - this.samples[1].t > RATE_WINDOW_MS) this.samples.shift();
    switch (this.opts.mode) {
      case "terminal":
        if (changed || t - this.shownAt >= this.intervalMs) this.draw(t);
        break;
      case "lines":
        if (t - this.shownAt >= this.intervalMs) {
          this.shownAt = t;
          this.out(`${this.text(t)}\n`);
        }
        break;
      case "json":
        if (changed || t - this.shownAt >= this.intervalMs) {
          this.shownAt = t;
          this.json(this.event(t));
        }
        break;
    }
  }

  /** A line the command prints per item ("index sha256:… (team/app)"); none when quiet. */
  line(text: string): void {
    switch (this.opts.mode) {
      case "quiet":
        return;
      case "json":
        return this.json({ type: "line", command: this.command, text });
      case "terminal":
        this.clear();
        this.out(`${text}\n`);
        this.redraw();
        return;
      default:
        this.out(`${text}\n`);
    }
  }

  /**
   * A part's own outcome (one sync entry's run, one ecosystem's download): shown in every mode,
   * quiet included; in JSON a `result` object with `line` and `fields`.
   */
  result(text: string, fields: Record<string, unknown> = {}): void {
    if (this.opts.mode === "json") {
      return this.json({ type: "result", command: this.command, line: text, ...snakeKeys(fields) });
    }
    this.clear();
    this.out(`${text}\n`);
    if (this.opts.mode === "terminal") this.redraw();
  }

  /** The command stops without a summary (an exception): the terminal line is cleared. */
  stop(): void {
    this.ended = true;
    this.clear();
  }

  /** An error, on standard error in every mode. */
  error(text: string): void {
    if (this.opts.mode === "terminal") this.clear();
    this.err(text);
    if (this.opts.mode === "terminal") this.redraw();
  }

  /**
   * The end: the summary line (the terminal's progress line cleared first), or in JSON mode the
   * summary object: `line`, `elapsed_secs` and `fields`.
   */
  summary(line: string, fields: Record<string, unknown> = {}): void {
    this.ended = true;
    const elapsed = round((this.now() - this.t0) / 1000, 3);
    if (this.opts.mode === "json") {
      this.json({
        type: "summary",
        command: this.command,
        line,
        elapsed_secs: elapsed,
        ...snakeKeys(fields),
      });
      return;
    }
    this.clear();
    this.out(`${line}\n`);
  }

  /** Seconds since the reporter was made. */
  elapsedSecs(): number {
    return (this.now() - this.t0) / 1000;
  }

  /**
   * The progress line again under lines printed above it, unless it was drawn within
   * the interval (thousands of item lines then cost a write each, not three): the next update
   * draws it.
   */
  private redraw(): void {
    const t = this.now();
    if (this.last && !this.ended && t - this.shownAt >= this.intervalMs) this.draw(t);
  }

  private draw(t: number): void {
    this.shownAt = t;
    const width = Math.max(20, this.columns() - 1);
    let text = this.text(t);
    if (text.length > width) text = `${text.slice(0, width - 1)}…`;
    this.shown = text;
    this.out(`\r${text}\x1b[K`);
  }

  private clear(): void {
    if (this.shown === "") return;
    this.out("\r\x1b[K");
    this.shown = "";
  }

  private json(o: Record<string, unknown>): void {
    this.out(`${JSON.stringify(o)}\n`);
  }

  /** Items and bytes per second over the rate window of the current phase. */
  private rates(t: number): { rate: number | null; bytesRate: number | null; eta: number | null } {
    const u = this.last!;
    const first = this.samples[0];
    const dt = (t - (this.samples.length > 1 ? first.t : this.phaseStart)) / 1000;
    const base = this.samples.length > 1 ? first : { done: 0, bytes: 0 };
    if (dt <= 0.2) return { rate: null, bytesRate: null, eta: null };
    const rate = Math.max(0, (u.done - base.done) / dt);
    const bytesRate = u.bytes === undefined
      ? null
      : Math.max(0, ((u.bytes ?? 0) - base.bytes) / dt);
    let eta: number | null = null;
    if (t - this.phaseStart >= ETA_AFTER_MS) {
      if (u.bytesTotal != null && bytesRate) eta = (u.bytesTotal - (u.bytes ?? 0)) / bytesRate;
      else if (u.total !== null && rate > 0) eta = (u.total - u.done) / rate;
    }
    return { rate, bytesRate, eta: eta === null ? null : Math.max(0, eta) };
  }

  /** The progress line's text. */
  text(t: number = this.now()): string {
    const u = this.last;
    if (!u) return `${this.command}: starting`;
    const { rate, bytesRate, eta } = this.rates(t);
    const parts: string[] = [];
    const pct = u.total !== null && u.total > 0
      ? ` (${Math.floor((100 * Math.min(u.done, u.total)) / u.total)}%)`
      : "";
    parts.push(
      `${this.command}: ${u.phase ? `${u.phase} ` : ""}${
        u.total === null ? `${u.done}` : `${u.done}/${u.total}`
      } ${u.unit}${pct}`,
    );
    if (u.bytes !== undefined) {
      parts.push(
        `${bytesText(u.bytes)}${u.bytesTotal != null ? ` of ${bytesText(u.bytesTotal)}` : ""}`,
      );
    }
    if (u.note) parts.push(u.note);
    if (rate !== null) {
      parts.push(
        `${rateText(rate)} ${u.unit}/s${bytesRate !== null ? `, ${bytesText(bytesRate)}/s` : ""}`,
      );
    }
    if (eta !== null) parts.push(`${durationText(eta)} left`);
    return parts.join(" · ");
  }

  private event(t: number): Record<string, unknown> {
    const u = this.last!;
    const { rate, bytesRate, eta } = this.rates(t);
    return {
      type: "progress",
      command: this.command,
      ...(u.phase ? { phase: u.phase } : {}),
      unit: u.unit,
      done: u.done,
      total: u.total,
      ...(u.bytes !== undefined ? { bytes: u.bytes, bytes_total: u.bytesTotal ?? null } : {}),
      ...(u.note ? { note: u.note } : {}),
      rate: rate === null ? null : round(rate, 2),
      ...(u.bytes !== undefined
        ? { bytes_rate: bytesRate === null ? null : round(bytesRate) }
        : {}),
      eta_secs: eta === null ? null : round(eta, 1),
      elapsed_secs: round((t - this.t0) / 1000, 3),
    };
  }
}

/** JSON field names as the rest of Wharf's JSON spells them (usageDrift → usage_drift). */
function snakeKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(o).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]),
  );
}

/** The terminal's width; a pseudo-terminal of no size (script, some CI) reads as COLUMNS or 80. */
function terminalColumns(): number {
  let n = 0;
  try {
    n = Deno.consoleSize().columns;
  } catch {
    n = 0;
  }
  return n >= 20 ? n : Number(Deno.env.get("COLUMNS")) || 80;
}

function round(n: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function bytesText(n: number): string {
  if (n < 1024) return `${Math.round(n)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

function rateText(r: number): string {
  return r >= 100 ? String(Math.round(r)) : r >= 10 ? r.toFixed(1) : r.toFixed(2);
}

export function durationText(secs: number): string {
  const s = Math.round(secs);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}
