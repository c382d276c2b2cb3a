// A broken machine is not a verdict about an image (issue 33). When indexing could not run at all
// (no sandbox could start, a child killed from outside, the KV or blob store failing), the layer
// gets no verdict: its record says `unavailable` with the cause, the API answers 503, and the job
// is retried; a heal pass queues it again once the machine may be fixed (layer_heal.ts). Versions
// before this recorded such failures as `unsupported`, final: those records are read as machine
// failures too, by their error text.
import { isPermanent } from "../jobs/mod.ts";
import { INDEX_VERSION, type IndexRecord } from "./layer_store.ts";
import { IndexError } from "./walk_errors.ts";

/** How often one layer (or job) that keeps failing for a machine reason is queued by a heal. */
export const MAX_HEALS = 3;

/** A record's error is kept short: the record stays a small KV value. */
const MAX_CAUSE = 2000;

/**
 * What older versions recorded as a verdict although the machine had failed: a sandbox that
 * could not start, or a child ended by a signal nobody on this side sent (the OOM killer).
 */
const OLD_MACHINE_ERRORS = [
  /no sandbox (process|worker) could be started/,
  /sandbox died \(signal SIG(KILL|TERM|INT|HUP)\)/,
];

/** What every machine failure's message says, so a dead letter is told apart from a verdict. */
const MACHINE_MARK = "could not run (machine)";

/**
 * A job that failed through no fault of its input: never permanent (lib/jobs backs it off and
 * retries it), and marked in its message for the heal passes.
 */
export class MachineFailureError extends Error {
  override name = "MachineFailureError";
  readonly permanent = false;
  /** read by the error mapper (routes/errors.ts): 503, not 500 */
  readonly machine = true;
}

/** The message (and warn log line) of a machine failure of `what` ("index of sha256:…"). */
export function machineMessage(what: string, cause: string): string {
  return `${what} ${MACHINE_MARK}: ${cause}; retried`;
}

/** Whether an error's text (a job's last_error, a report warning) names a machine failure. */
export function isMachineFailureText(text: string): boolean {
  return text.includes(MACHINE_MARK) || /sandbox was ended by SIG\w+ from outside/.test(text) ||
    OLD_MACHINE_ERRORS.some((re) => re.test(text));
}

/** Whether `e` says the machine failed (SandboxUnavailableError, MachineFailureError). */
export function isMachineError(e: unknown): boolean {
  return typeof e === "object" && e !== null && (e as { machine?: unknown }).machine === true;
}

/**
 * Whether an error that ended an index job is about the layer, not the machine: a permanent error
 * (a budget, a partial listing, a blob not stored) or the child's own IndexError, which keep
 * their old handling. Everything else is the machine's.
 */
export function isLayerError(e: unknown): boolean {
  return isPermanent(e) || e instanceof IndexError;
}

/** The cause when `rec` records a machine failure (this version's or an older one's), else null. */
export function machineFailure(rec: IndexRecord | null | undefined): string | null {
  if (!rec) return null;
  if (rec.state === "unavailable") return rec.error ?? "indexing could not run";
  const error = rec.error ?? "";
  if (rec.state === "unsupported" && OLD_MACHINE_ERRORS.some((re) => re.test(error))) return error;
  return null;
}

/**
 * The record of a layer whose indexing could not run, replacing `current` only when that holds
 * no listing and no verdict (nothing, or an earlier machine failure): null to keep `current`.
 * Its version is 0 (no listing of any version), so whatever waits for a current index of the
 * layer (a scan, a diff, `reindex`) waits for this one too.
 */
export function unavailableRecord(
  current: IndexRecord | null,
  cause: string,
  now = Date.now(),
): IndexRecord | null {
  if (current && machineFailure(current) === null) return null;
  return {
    version: 0,
    state: "unavailable",
    compression: null,
    uncompressedSize: 0,
    entries: 0,
    error: cause.length > MAX_CAUSE ? `${cause.slice(0, MAX_CAUSE)}…` : cause,
    indexedAt: now,
    base: current?.base ?? "",
    ...(current?.heals ? { heals: current.heals } : {}),
  };
}

/** Whether the record is current and final: nothing for `reindex` or a heal to queue. */
export function settled(rec: IndexRecord | null): boolean {
  return rec !== null && rec.version >= INDEX_VERSION && machineFailure(rec) === null;
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message || e.name : String(e);
}
