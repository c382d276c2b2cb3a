// The layer index (issue: layer index; SPEC §Layer listing, Layer entries 1–4, Layer file 1–7,
// §Layer file details): its public surface. LayerIndex (layer_index.ts) runs the `index-layer`
// job and answers the three endpoints; the job walks a layer in stages (indexer.ts); file search
// (file_search.ts) and the write-effects subscriber that queues the jobs on a push
// (write_effects.ts, layer_jobs.ts) sit beside them. The index's own records (a layer's
// IndexRecord, the file-search keys) are IndexRecords' (index_records.ts), which the composition
// root builds over the KV; another folder asks LayerIndex, as a LayerIndexReader, for a layer's
// record and its index job.
export {
  type EntriesAnswer,
  type FileAnswer,
  forgetLayerIndex,
  LayerIndex,
  type LayerIndexDeps,
  type LayerIndexReader,
} from "./layer_index.ts";
export { type FileIndexDone, IndexRecords } from "./index_records.ts";
export { indexLayer } from "./indexer.ts";
export {
  INDEX_JOBS_IN_COMMIT,
  INDEX_KIND,
  indexesOnPush,
  indexLayerJob,
  isTarLayer,
  tarLayers,
} from "./layer_jobs.ts";
export { IndexEffects } from "./write_effects.ts";
export { detectCompression } from "./layer_decode.ts";
export {
  FILE_INDEX_VERSION,
  type FileSearchDeps,
  isNamePattern,
  MAX_NAME_PATTERN,
  MAX_PATH,
  parseNamePattern,
  searchableLength,
  type SearchField,
  searchFiles,
  type SearchHit,
  type SearchPage,
  writeFileIndex,
} from "./file_search.ts";
export { KINDS as SECRET_KIND_NAMES, type SecretFinding, SecretScanner } from "./secrets.ts";
export { describeSecretKind, SECRET_KINDS, type SecretKindInfo } from "./secret_kinds.ts";
export { LayerReader, listingLines } from "./layer_store.ts";
export { typeFromName } from "./mime.ts";
export {
  INDEX_VERSION,
  indexKey,
  type IndexRecord,
  listed,
  type ListedEntry,
} from "./layer_store.ts";
export {
  errorText,
  isMachineError,
  isMachineFailureText,
  machineFailure,
  MachineFailureError,
  machineMessage,
  MAX_HEALS,
} from "./machine_failure.ts";
export { healDeadLetters, type HealOptions, type HealResult } from "./layer_heal.ts";
export { utf8Length } from "./utf8.ts";
export { catalogWalk, type WalkStep } from "./catalog_walk.ts";
