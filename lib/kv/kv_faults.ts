// What a KV file that cannot take a write answers: 503 PROVIDER_UNAVAILABLE with Retry-After and a
// detail naming the file and the cause, never a 500 with none. Deno KV's SQLite backend reports
// its failures only as messages (a TypeError), measured here on Deno 2.9.6:
//   filesystem full                   "database or disk is full"
//   another process holds the lock    "database is locked" (after Deno's own 5 s busy wait)
//   file not writable when opened     "Can not write to a read-only database."
// A running process keeps its open descriptors, so a chmod, `chattr +i` or a read-only bind
// mount made after it opened the file changes nothing for it (a remount read-only is refused
// while it writes); the read-only answer comes from a file that was so when the process started.
import { type RegistryError, unavailable } from "../oci/mod.ts";

export type KvFaultKind = "full" | "locked" | "read_only" | "unavailable";

const KINDS: [RegExp, KvFaultKind, string][] = [
  [/database or disk is full|no space left on device/i, "full", "is full"],
  [/database is locked|database is busy/i, "locked", "is locked by another process"],
  [/read-?only database/i, "read_only", "is read-only"],
  [/disk I\/O error|unable to open database file/i, "unavailable", "cannot be written"],
];

/** Seconds a client is told to wait: a lock or an I/O hiccup passes sooner than a full disk. */
const RETRY_AFTER_SECS: Record<KvFaultKind, number> = {
  full: 30,
  locked: 5,
  read_only: 5,
  unavailable: 5,
};

/** The kind of a KV failure that means the file cannot take writes now; null: another error. */
export function kvFaultKind(e: unknown): KvFaultKind | null {
  if (!(e instanceof Error)) return null;
  for (const [re, kind] of KINDS) if (re.test(e.message)) return kind;
  return null;
}

/**
 * The 503 for a KV failure of `kind` on the file `where`: `the metadata store (data/metadata.kv)
 * is full (database or disk is full): retry later`.
 */
export function kvFaultError(kind: KvFaultKind, where: string, e: Error): RegistryError {
  const [, , state] = KINDS.find(([, k]) => k === kind)!;
  return unavailable(
    `the metadata store (${where}) ${state} (${e.message}): retry later`,
    RETRY_AFTER_SECS[kind],
  );
}

/** The error mapper's safety net: a KV failure that escaped a wrapper, as its 503. */
export function kvFaultAnswer(e: unknown): RegistryError | null {
  const kind = kvFaultKind(e);
  return kind ? kvFaultError(kind, "KV", e as Error) : null;
}
