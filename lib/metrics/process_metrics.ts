// The process: memory, heap, start time and event-loop lag.
import { EventLoopLag } from "./event_loop.ts";
import { Gauge, type InstrumentSet, MetricGroup } from "./instruments.ts";

/** The process's own figures, read at scrape time. */
export class ProcessMetrics extends MetricGroup {
  readonly residentMemory = this.set.add(
    new Gauge("process_resident_memory_bytes", "Resident memory size in bytes", []),
  );

  readonly heap = this.set.add(
    new Gauge("wharf_heap_bytes", "V8 heap and external memory in bytes", ["kind"]),
  );

  readonly startTime = this.set.add(
    new Gauge("process_start_time_seconds", "Start time of the process since the epoch", []),
  );

  private readonly loopLag = this.set.add(
    new Gauge(
      "wharf_event_loop_lag_seconds",
      "How late the serving thread ran a 50 ms timer over the last minute (p99, max)",
      ["quantile"],
    ),
  );

  /** Watched once serving starts (`watchEventLoop`). */
  readonly eventLoop = new EventLoopLag();

  /** Starts measuring event-loop lag (stopped with `stopWatching`). */
  watchEventLoop(): void {
    this.eventLoop.start();
    this.loopLag.collect = () => {
      const { p99, max } = this.eventLoop.summary();
      this.loopLag.set(p99, ["0.99"]);
      this.loopLag.set(max, ["1"]);
    };
  }

  stopWatching(): void {
    this.eventLoop.stop();
  }

  constructor(set: InstrumentSet) {
    super(set);
    this.startTime.set(Math.round(Date.now() / 1000 - performance.now() / 1000));
    this.residentMemory.collect = () => {
      const m = Deno.memoryUsage();
      this.residentMemory.set(m.rss);
      this.heap.set(m.heapUsed, ["used"]);
      this.heap.set(m.heapTotal, ["total"]);
      this.heap.set(m.external, ["external"]);
    };
  }
}
