// The error mapper's safety net for store errors that escaped as raw errors: an S3 refusal or an
// operating system error (a file written outside a store) still answers 503 with its cause.
import type { RegistryError } from "../oci/mod.ts";
import { osFault, storeFault } from "./faults.ts";
import { S3Error } from "./s3_client.ts";

/** The 503 a raw store error answers; null: not a store's error. */
export function storeErrorAnswer(e: unknown): RegistryError | null {
  if (e instanceof S3Error) return e.answer();
  const f = osFault(e);
  return f ? storeFault(f.kind, "a store of this server", f.why) : null;
}
