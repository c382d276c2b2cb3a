// Counters, gauges and histograms with label maps, rendered in the Prometheus text format 0.0.4.
// Hand-written rather than npm:prom-client 15.1.3 (which does run under Deno): measured here,
// counter.inc + histogram.observe with labels cost 0.24 µs vs 0.76 µs, rendering ~30 series
// 58 µs vs 103 µs, and the format is small and stable. No dependency (prom-client brings
// @opentelemetry/api, tdigest).

/** Label values in the order of the instrument's label names. */
export type LabelValues = readonly string[];

interface Instrument {
  readonly name: string;
  render(out: string[]): void;
}

function escapeLabel(v: string): string {
  return /[\\"\n]/.test(v) ? v.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`)) : v;
}

function escapeHelp(v: string): string {
  return v.replace(/[\\\n]/g, (c) => (c === "\n" ? "\\n" : "\\\\"));
}

function labelText(names: readonly string[], values: LabelValues, extra = ""): string {
  const parts: string[] = [];
  for (let i = 0; i < names.length; i++) parts.push(`${names[i]}="${escapeLabel(values[i])}"`);
  if (extra) parts.push(extra);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function num(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

function header(out: string[], name: string, help: string, type: string): void {
  out.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
}

/**
 * Series keyed by their joined label values. Callers on a hot path with fixed labels may keep
 * the series object from `series()` and skip the lookup.
 */
abstract class Labelled<S> implements Instrument {
  protected readonly byKey = new Map<string, { values: LabelValues; s: S }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}

  protected abstract fresh(): S;

  series(values: LabelValues): S {
    if (values.length !== this.labelNames.length) {
      throw new Error(`${this.name}: expected ${this.labelNames.length} label values`);
    }
    const key = values.length === 1 ? values[0] : values.join("\u0000");
    let e = this.byKey.get(key);
    if (!e) {
      e = { values: [...values], s: this.fresh() };
      this.byKey.set(key, e);
    }
    return e.s;
  }

  abstract render(out: string[]): void;
}

export class Counter extends Labelled<{ v: number }> {
  protected fresh() {
    return { v: 0 };
  }

  inc(values: LabelValues = [], by = 1): void {
    this.series(values).v += by;
  }

  get(values: LabelValues = []): number {
    return this.series(values).v;
  }

  render(out: string[]): void {
    header(out, this.name, this.help, "counter");
    for (const { values, s } of this.byKey.values()) {
      out.push(`${this.name}${labelText(this.labelNames, values)} ${num(s.v)}`);
    }
  }
}

export class Gauge extends Labelled<{ v: number }> {
  /** read at render time instead of stored values (e.g. a KV census, memory usage) */
  collect: (() => void | Promise<void>) | null = null;

  protected fresh() {
    return { v: 0 };
  }

  set(v: number, values: LabelValues = []): void {
    this.series(values).v = v;
  }

  inc(values: LabelValues = [], by = 1): void {
    this.series(values).v += by;
  }

  dec(values: LabelValues = [], by = 1): void {
    this.series(values).v -= by;
  }

  get(values: LabelValues = []): number {
    return this.series(values).v;
  }

  render(out: string[]): void {
    header(out, this.name, this.help, "gauge");
    for (const { values, s } of this.byKey.values()) {
      out.push(`${this.name}${labelText(this.labelNames, values)} ${num(s.v)}`);
    }
  }
}

export interface HistogramSeries {
  /** per-bucket (non-cumulative) counts; the last slot is +Inf */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class Histogram extends Labelled<HistogramSeries> {
  readonly buckets: Float64Array;

  constructor(name: string, help: string, labelNames: readonly string[], buckets: number[]) {
    super(name, help, labelNames);
    this.buckets = Float64Array.from([...buckets].sort((a, b) => a - b));
  }

  protected fresh(): HistogramSeries {
    return { counts: new Float64Array(this.buckets.length + 1), sum: 0, count: 0 };
  }

  observe(v: number, values: LabelValues = []): void {
    Histogram.add(this.series(values), this.buckets, v);
  }

  static add(s: HistogramSeries, buckets: Float64Array, v: number): void {
    // Few buckets: a linear scan from the bottom beats binary search for the usual small values.
    let i = 0;
    while (i < buckets.length && v > buckets[i]) i++;
    s.counts[i]++;
    s.sum += v;
    s.count++;
  }

  get(values: LabelValues = []): HistogramSeries {
    return this.series(values);
  }

  render(out: string[]): void {
    header(out, this.name, this.help, "histogram");
    for (const { values, s } of this.byKey.values()) {
      let acc = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        acc += s.counts[i];
        const le = `le="${num(this.buckets[i])}"`;
        out.push(`${this.name}_bucket${labelText(this.labelNames, values, le)} ${acc}`);
      }
      const inf = labelText(this.labelNames, values, 'le="+Inf"');
      out.push(`${this.name}_bucket${inf} ${s.count}`);
      out.push(`${this.name}_sum${labelText(this.labelNames, values)} ${num(s.sum)}`);
      out.push(`${this.name}_count${labelText(this.labelNames, values)} ${s.count}`);
    }
  }
}

/** The instruments of one exposition, rendered in registration order. */
export class InstrumentSet {
  private readonly all: Instrument[] = [];
  private readonly names = new Set<string>();

  add<T extends Instrument>(i: T): T {
    if (this.names.has(i.name)) throw new Error(`metric ${i.name} registered twice`);
    this.names.add(i.name);
    this.all.push(i);
    return i;
  }

  async render(): Promise<string> {
    // A failing collector (e.g. the KV census timing out) leaves its last value: a scrape
    // still answers with everything else.
    await Promise.all(
      this.all.map((i) =>
        i instanceof Gauge && i.collect
          ? Promise.resolve().then(i.collect).catch(() => {})
          : undefined
      ),
    );
    const out: string[] = [];
    for (const i of this.all) i.render(out);
    out.push("");
    return out.join("\n");
  }
}

/** One area's instruments (http_metrics.ts, store_metrics.ts, …), registered into a shared set. */
export class MetricGroup {
  constructor(protected readonly set: InstrumentSet) {}
}
