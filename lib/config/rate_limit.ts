// `[global.rate_limit]` and `[repository."<name>".rate_limit]` (issue 26, part 3): the numbers of
// the token buckets and who is exempt. Types and the TOML reader live here so the section readers
// (global_config.ts, repository_config.ts) only call in; a problem names its key path.
import { parse as parseCel } from "@marcbachmann/cel-js";
import { type KnownIdentities, parseIdentityRef } from "./identity_refs.ts";

export interface RateLimitConfig {
  /** manifest GETs per identity per hour (Docker Hub's count); null: inherit/off, 0: no limit */
  pullsPerHour: number | null;
  /** requests per identity per second (refill); null: inherit/off, 0: no limit */
  requestsPerSecond: number | null;
  /** bucket size of requests_per_second; null: inherit, else requests_per_second */
  burst: number | null;
  /** identities never limited, canonical `provider:name` (identity_refs.ts) */
  exemptIdentities: string[];
  /** CEL over `request` and `identity` (as access policies see them): true exempts */
  exemptRules: string[];
  /** `[global.rate_limit]` only: how often a process settles its counts with the KV */
  syncIntervalMs: number;
  /** the key path of the table, for messages */
  where: string;
}

export const RATE_LIMIT_DEFAULTS = { syncIntervalMs: 1000 } as const;

type Table = Record<string, unknown>;
type Fail = (key: string, msg: string) => never;

const KEYS = [
  "pulls_per_hour",
  "requests_per_second",
  "burst",
  "exempt_identities",
  "exempt_rules",
];

export function readRateLimit(
  v: unknown,
  path: string,
  global: boolean,
  fail: Fail,
  known: KnownIdentities,
): RateLimitConfig | null {
  if (v === undefined) return null;
  if (typeof v !== "object" || v === null || Array.isArray(v) || v instanceof Date) {
    fail(path, "must be a table");
  }
  const t = v as Table;
  const allowed = global ? [...KEYS, "sync_interval_ms"] : KEYS;
  for (const k of Object.keys(t)) if (!allowed.includes(k)) fail(`${path}.${k}`, "unknown key");
  const int = (k: string, min: number, max: number): number | null => {
    const x = t[k];
    if (x === undefined) return null;
    const n = typeof x === "bigint" ? Number(x) : x;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max) {
      fail(`${path}.${k}`, `must be an integer from ${min} to ${max}`);
    }
    return n;
  };
  const strings = (k: string): string[] => {
    const x = t[k];
    if (x === undefined) return [];
    if (!Array.isArray(x) || x.some((s) => typeof s !== "string")) {
      fail(`${path}.${k}`, "must be an array of strings");
    }
    return x as string[];
  };
  const exempt = strings("exempt_identities").map((entry, i) => {
    const ref = parseIdentityRef(entry, known);
    if (typeof ref !== "string") fail(`${path}.exempt_identities[${i}]`, ref.error);
    return ref;
  });
  const rules = strings("exempt_rules");
  for (const [i, src] of rules.entries()) {
    try {
      parseCel(src);
    } catch (e) {
      fail(`${path}.exempt_rules[${i}]`, `(${src}): ${(e as Error).message.split("\n")[0]}`);
    }
  }
  return {
    pullsPerHour: int("pulls_per_hour", 0, 1_000_000_000),
    requestsPerSecond: int("requests_per_second", 0, 1_000_000),
    burst: int("burst", 1, 1_000_000_000),
    exemptIdentities: exempt,
    exemptRules: rules,
    syncIntervalMs: int("sync_interval_ms", 10, 60_000) ?? RATE_LIMIT_DEFAULTS.syncIntervalMs,
    where: path,
  };
}
