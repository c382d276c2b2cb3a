// How a job handler says a retry cannot help (upstream 403, digest mismatch, unparseable
// manifest): the job is dead-lettered at once instead of backing off.
export class PermanentJobError extends Error {
  override name = "PermanentJobError";
}

/** Thrown by enqueue when a job's record would not fit a KV value. */
export class JobTooLargeError extends Error {
  override name = "JobTooLargeError";
}

/** True for errors that should dead-letter at once; handlers may also set `permanent: true`. */
export function isPermanent(e: unknown): boolean {
  return e instanceof PermanentJobError ||
    (typeof e === "object" && e !== null && (e as { permanent?: unknown }).permanent === true);
}

/** A failed record that is not a job (a poison value): it can be deleted, not retried. */
export class NotAJobError extends Error {
  override name = "NotAJobError";
}
