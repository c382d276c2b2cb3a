// The error mapper's safety net for store failures that escaped as raw errors (routes/ reaches no
// storage or KV module itself): an S3 refusal, an operating system error such as ENOSPC, or a KV
// failure such as "database or disk is full" answers 503 with its cause, never 500 with none.
import type { RegistryError } from "../oci/mod.ts";
import { storeErrorAnswer } from "../storage/mod.ts";
import { kvFaultAnswer } from "../kv/mod.ts";

/** The 503 a raw store or KV error answers; null: not a store's error. */
export function storeFaultAnswer(e: unknown): RegistryError | null {
  return storeErrorAnswer(e) ?? kvFaultAnswer(e);
}
