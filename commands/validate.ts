// What a config must pass beyond loading before it is served or pruned with.
import type { Config } from "../lib/config/mod.ts";
import { PolicySet } from "../lib/policy/mod.ts";
import {
  compileRetention,
  pullTimesWithoutRecording,
  RetentionCompileError,
} from "../lib/retention/mod.ts";

/**
 * At startup and on reload: every CEL rule compiles, and a retention schedule does not read pull
 * times nobody records.
 */
export function validated(cfg: Config): PolicySet {
  const policies = new PolicySet(cfg);
  const rules = compileRetention(cfg);
  const key = pullTimesWithoutRecording(cfg, rules);
  if (key && cfg.global.retentionSchedule.intervalSecs !== null) {
    throw new RetentionCompileError(
      `${key} reads pull times but global.update_pull_time is off (they are not recorded)`,
    );
  }
  return policies;
}
