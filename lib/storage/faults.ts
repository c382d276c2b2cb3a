// What a store that cannot take a write answers: 503 PROVIDER_UNAVAILABLE with Retry-After and a
// detail naming the store and the cause (SPEC §Errors allows only INTERNAL_ERROR,
// PROVIDER_UNAVAILABLE and RECLAMATION_IN_PROGRESS for 5xx, and a full or absent store is neither
// a bug nor a reclamation). The operating system's error codes are classified here once, for the
// fs store and for the error mapper's safety net (routes/errors.ts).
import { type RegistryError, unavailable } from "../oci/mod.ts";

/** `full`: no room (ENOSPC, EDQUOT, or below the reserve); `unavailable`: cannot be used now. */
export type FaultKind = "full" | "unavailable";

/** How a store tells the watch (watch.ts) what its operations met. */
export interface FaultReport {
  ok(): void;
  /** `cause`: the refusal's label in metrics (full, unavailable, locked, read_only) */
  fault(cause: string, detail: string): void;
}

/** Seconds a client is told to wait: space comes back slower than a store restarts. */
export const RETRY_AFTER_SECS: Record<FaultKind, number> = { full: 30, unavailable: 5 };

/** The operating system's reason for an error, by errno name; null: not a store fault. */
const OS_FAULTS: Record<string, { kind: FaultKind; why: string }> = {
  ENOSPC: { kind: "full", why: "no space left on device" },
  EDQUOT: { kind: "full", why: "disk quota exceeded" },
  EROFS: { kind: "unavailable", why: "read-only file system" },
  EIO: { kind: "unavailable", why: "input/output error" },
  ENOTCONN: { kind: "unavailable", why: "transport endpoint is not connected" },
  ESTALE: { kind: "unavailable", why: "stale file handle" },
  EACCES: { kind: "unavailable", why: "permission denied" },
  EPERM: { kind: "unavailable", why: "operation not permitted" },
};

/** The kind and reason of an operating system error that means the store cannot be written. */
export function osFault(e: unknown): { kind: FaultKind; why: string } | null {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" ? OS_FAULTS[code] ?? null : null;
}

/**
 * The answer to a write `store` (a label such as "the blob store (/data/blobs)") cannot take:
 * `the blob store (/data/blobs) is full (no space left on device): retry later`.
 */
export function storeFault(kind: FaultKind, store: string, why: string): RegistryError {
  const state = kind === "full" ? "is full" : "is unavailable";
  return unavailable(`${store} ${state} (${why}): retry later`, RETRY_AFTER_SECS[kind]);
}

/** Bytes for people: `12.0 MiB`. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}
