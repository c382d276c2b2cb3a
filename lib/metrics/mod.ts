// Prometheus instruments under stable names (`/metrics`), and byte-counting streams for bodies.
export { Metrics } from "./metrics.ts";
export { type AuthResultLabel, REQUEST_BUCKETS } from "./http_metrics.ts";
export { STORE_BUCKETS, type StoreFigures, type StoreRefusals } from "./store_metrics.ts";
export { type RepositoryUsageFigures } from "./registry_metrics.ts";
export { SCRUB_KINDS, type ScrubResult } from "./maintenance_metrics.ts";
export { Counter, Gauge, Histogram, InstrumentSet, type LabelValues } from "./instruments.ts";
export { countingByteStream, countingStream } from "./counting_streams.ts";
