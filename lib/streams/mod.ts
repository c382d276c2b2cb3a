// Bytes in passing: digests computed as a stream goes by, buffers joined, and the scavenger that
// keeps dead chunk buffers from piling up in RSS. Outbound HTTP lives in lib/http/.
export { digestBytes, Hasher } from "./hasher.ts";
export { concatBytes } from "./concat.ts";
export { Scavenger } from "./scavenge.ts";
