// Typed reads of one TOML table's keys for the config readers beside load.ts (hooks.ts,
// sync.ts): each names the key's full path when it fails, as every config error does.
export type Table = Record<string, unknown>;
export type Fail = (key: string, msg: string) => never;

export const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** Fails on the first key of `t` not in `allowed`. */
export function only(t: Table, path: string, allowed: string[], fail: Fail): void {
  for (const k of Object.keys(t)) if (!allowed.includes(k)) fail(`${path}.${k}`, "unknown key");
}

export function int(
  t: Table,
  k: string,
  path: string,
  min: number,
  max: number,
  fail: Fail,
): number | undefined {
  const v = t[k];
  if (v === undefined) return undefined;
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max) {
    fail(`${path}.${k}`, `must be an integer from ${min} to ${max}`);
  }
  return n as number;
}

export function strings(t: Table, k: string, path: string, fail: Fail): string[] | undefined {
  const v = t[k];
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
    fail(`${path}.${k}`, "must be an array of strings");
  }
  return v as string[];
}

export function bool(t: Table, k: string, path: string, fail: Fail): boolean | undefined {
  const v = t[k];
  if (v === undefined) return undefined;
  if (typeof v !== "boolean") fail(`${path}.${k}`, "must be true or false");
  return v as boolean;
}

/** `v` as a table; an absent one is empty. */
export function table(v: unknown, path: string, fail: Fail): Table {
  if (v === undefined) return {};
  if (!isTable(v)) fail(path, "must be a table");
  return v as Table;
}
