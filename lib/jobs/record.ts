// A job as stored in KV, its storage key, and the admin API's view of it (SPEC §Job).
// The storage key is `<not-before ms, 16 hex digits>-<uuid>`: KV orders it by time, so one
// bounded `list` up to "now" finds exactly the due jobs, and the admin API's `not_before`
// is decoded from the key rather than stored twice.
import type { QueueName } from "../config/mod.ts";
import { K } from "../kv/mod.ts";

export interface JobRecord {
  id: string;
  kind: string;
  payload: unknown;
  lock_key: string;
  attempts: number;
  max_attempts: number;
  /** ms since the epoch */
  created_at: number;
  /** set while a worker holds the job; the key's time prefix is then the lease's end */
  holder?: string;
  last_error?: string;
  /** how often a worker died holding it (its lease ran out and another took it over) */
  takeovers?: number;
  /** how often a heal moved it back from the failed set after a machine failure */
  heals?: number;
  /** ms since the epoch; failed set only */
  failed_at?: number;
  /** the run it counts toward (a reindex or rescan batch: progress.ts), counted once settled */
  batch?: JobBatch;
}

/** A job's batch: the long run it counts toward (progress.ts). */
export interface JobBatch {
  kind: "reindex" | "rescan" | "sync";
  key: string;
}

export const pendingKey = (q: QueueName, sk: string): Deno.KvKey => K.jobPending(q, sk);
export const failedKey = (q: QueueName, sk: string): Deno.KvKey => K.jobFailed(q, sk);
export const lockKey = (q: QueueName, lk: string): Deno.KvKey => K.jobLock(q, lk);

const HEX16 = 16;
const STORAGE_KEY = /^[0-9a-f]{16}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function storageKey(atMs: number, id: string): string {
  return `${Math.max(0, Math.floor(atMs)).toString(16).padStart(HEX16, "0")}-${id}`;
}

export function isStorageKey(s: string): boolean {
  return STORAGE_KEY.test(s);
}

/** The time prefix of a storage key, ms since the epoch. */
export function keyTime(sk: string): number {
  return parseInt(sk.slice(0, HEX16), 16);
}

/** The exclusive end of a `list` over keys due at `atMs` or earlier. */
export function dueEnd(q: QueueName, atMs: number): Deno.KvKey {
  return pendingKey(q, storageKey(atMs + 1, ""));
}

/** A stored value that is a usable job, or null: anything else is a poison record. */
export function parseRecord(v: unknown): JobRecord | null {
  if (!v || typeof v !== "object") return null;
  const r = v as Record<string, unknown>;
  const ok = typeof r.id === "string" && typeof r.kind === "string" &&
    typeof r.lock_key === "string" && Number.isSafeInteger(r.attempts) &&
    Number.isSafeInteger(r.max_attempts) && (r.max_attempts as number) > 0 &&
    typeof r.created_at === "number" && Number.isFinite(r.created_at);
  return ok ? r as unknown as JobRecord : null;
}

export interface JobView {
  storage_key: string;
  id: string;
  kind: string;
  lock_key: string;
  attempts: number;
  max_attempts: number;
  created_at: string;
  not_before?: string;
  failed_at?: string;
  last_error?: string;
}

const iso = (ms: unknown): string => {
  const d = new Date(typeof ms === "number" && Number.isFinite(ms) ? ms : 0);
  return isNaN(d.getTime()) ? new Date(0).toISOString() : d.toISOString();
};

const str = (v: unknown, fallback: string): string => typeof v === "string" ? v : fallback;
const int = (v: unknown): number => Number.isSafeInteger(v) ? v as number : 0;

/** The admin API's view; tolerant of poison records so a listing never fails on one. */
export function toView(sk: string, v: unknown, set: "pending" | "failed"): JobView {
  const r = (v && typeof v === "object" ? v : {}) as Record<string, unknown>;
  const view: JobView = {
    storage_key: sk,
    id: str(r.id, sk.slice(HEX16 + 1)),
    kind: str(r.kind, "unknown"),
    lock_key: str(r.lock_key, ""),
    attempts: int(r.attempts),
    max_attempts: int(r.max_attempts),
    created_at: iso(r.created_at),
  };
  if (set === "pending") view.not_before = iso(keyTime(sk));
  else {
    view.failed_at = iso(r.failed_at ?? keyTime(sk));
    view.last_error = str(r.last_error, "");
  }
  return view;
}

/** last_error is kept short: a record stays far below KV's 64 KiB value limit. */
export const MAX_ERROR_CHARS = 2000;

export function errorText(e: unknown): string {
  const s = e instanceof Error ? e.message || e.name : String(e);
  return s.length > MAX_ERROR_CHARS ? `${s.slice(0, MAX_ERROR_CHARS)}…` : s;
}
