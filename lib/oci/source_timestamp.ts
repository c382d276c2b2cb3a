// X-Svc-Source-Timestamp (SPEC, "Replication header"): an RFC 3339 event time, and the clock a tag's
// creation time and a delete's event time are read from. Both are kept to the microsecond: under
// SPEC's rule 2 only a strictly newer local copy refuses a replicated write, so two sites writing
// one tag within the same millisecond would each take the other's write and swap instead of
// converging (seen in CI: replication_test's two sites). Distinct microseconds order them.
// Milliseconds (a number with a fraction) stay the unit everywhere else: records, retention, UI.

const RFC3339 = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

let offset = 0;
let last = 0;

/**
 * Now, in milliseconds with a microsecond fraction: the monotonic clock anchored to the wall
 * clock (re-anchored when the wall clock was stepped by more than a second), strictly increasing
 * within this process, so two writes here never share a time.
 */
export function eventTime(): number {
  const wall = Date.now();
  let t = performance.timeOrigin + performance.now() + offset;
  if (Math.abs(t - wall) > 1000) {
    offset += wall - t;
    t = wall;
  }
  let us = Math.round(t * 1000);
  if (us <= last) us = last + 1;
  last = us;
  return us / 1000;
}

/** `ms` (with a fraction) as RFC 3339 UTC to the microsecond: `2026-11-28T21:23:19.123456Z`. */
export function formatSourceTimestamp(ms: number): string {
  const us = Math.round(ms * 1000);
  const whole = Math.floor(us / 1_000_000);
  const frac = String(us - whole * 1_000_000).padStart(6, "0");
  return `${new Date(whole * 1000).toISOString().slice(0, 19)}.${frac}Z`;
}

/**
 * The header's time in milliseconds (fraction kept to the microsecond), clamped to now (rule 6:
 * a future-dated time is the receiver's now); null when absent or not RFC 3339 (rule 1).
 */
export function parseSourceTimestamp(v: string | null, now = Date.now()): number | null {
  if (v === null) return null;
  const m = RFC3339.exec(v.trim());
  if (!m) return null;
  const seconds = Date.parse(`${m[1].replace(/[t ]/, "T")}${m[3].toUpperCase()}`);
  if (!Number.isFinite(seconds)) return null;
  const frac = (m[2] ?? "").slice(0, 6).padEnd(6, "0");
  const t = seconds + Number(frac) / 1000;
  return Math.min(t, now);
}
