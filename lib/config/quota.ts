// `[global.quota]`, `[repository."<name>".quota]` and `max_cache_bytes` (issue 26, parts 1–2):
// storage limits per repository. Types and the TOML reader live here so the section readers
// (global_config.ts, repository_config.ts) only call in; a problem names its key path.
import { type Fail, isTable, only, type Table } from "./table_readers.ts";

export interface QuotaConfig {
  /** a repository's limit when neither its own table nor a pattern sets one; null = none */
  defaultMaxBytes: number | null;
  /** `[[global.quota.namespace]]`: the first whose pattern fully matches a repository's name */
  namespaces: { pattern: RegExp; maxBytes: number }[];
}

export function defaultQuotaConfig(): QuotaConfig {
  return { defaultMaxBytes: null, namespaces: [] };
}

/** A byte count: an integer from 0 (0 refuses every new byte). */
export function readBytes(t: Table, key: string, path: string, fail: Fail): number | undefined {
  const v = t[key];
  if (v === undefined) return undefined;
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    fail(`${path}.${key}`, "must be a whole number of bytes, 0 or more");
  }
  return n;
}

export function readGlobalQuota(v: unknown, path: string, fail: Fail): QuotaConfig {
  const out = defaultQuotaConfig();
  if (v === undefined) return out;
  if (!isTable(v)) fail(path, "must be a table");
  only(v, path, ["default_max_bytes", "namespace"], fail);
  out.defaultMaxBytes = readBytes(v, "default_max_bytes", path, fail) ?? null;
  const list = v.namespace === undefined ? [] : Array.isArray(v.namespace) ? v.namespace : [
    v.namespace,
  ];
  list.forEach((e, i) => {
    const p = `${path}.namespace[${i}]`;
    if (!isTable(e)) fail(p, "must be a table");
    only(e, p, ["pattern", "max_bytes"], fail);
    if (typeof e.pattern !== "string") fail(`${p}.pattern`, "must be a string");
    const maxBytes = readBytes(e, "max_bytes", p, fail);
    if (maxBytes === undefined) fail(`${p}.max_bytes`, "is required");
    let pattern: RegExp;
    try {
      pattern = new RegExp(`^(?:${e.pattern})$`);
    } catch (err) {
      fail(`${p}.pattern`, `invalid regex: ${(err as Error).message}`);
    }
    out.namespaces.push({ pattern, maxBytes });
  });
  return out;
}

/** `[repository."<name>".quota]`: its `max_bytes`, or undefined without the table. */
export function readRepositoryQuota(v: unknown, path: string, fail: Fail): number | undefined {
  if (v === undefined) return undefined;
  if (!isTable(v)) fail(path, "must be a table");
  only(v, path, ["max_bytes"], fail);
  const n = readBytes(v, "max_bytes", path, fail);
  if (n === undefined) fail(`${path}.max_bytes`, "is required");
  return n;
}
