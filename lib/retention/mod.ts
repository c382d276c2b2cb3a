// Retention policies: CEL keep-rules over tags, and prune, which deletes what no rule keeps.
export {
  compileRetention,
  type ImageFacts,
  pullTimesWithoutRecording,
  RetentionCompileError,
  RetentionRules,
  type Verdict,
} from "./rules.ts";
export { formatPrune, prune, PRUNE_ACTOR, type PruneOptions, type PruneSummary } from "./prune.ts";
