// Prometheus instruments under stable names (`/metrics`), and byte-counting streams for bodies.
export {
  type AuthResultLabel,
  Metrics,
  type RepositoryUsageFigures,
  REQUEST_BUCKETS,
  SCRUB_KINDS,
  type ScrubResult,
  STORE_BUCKETS,
  type StoreFigures,
  type StoreRefusals,
} from "./metrics.ts";
export { Counter, Gauge, Histogram, InstrumentSet, type LabelValues } from "./instruments.ts";
export { countingByteStream, countingStream } from "./counting_streams.ts";
