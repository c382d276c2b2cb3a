// The typed reads every config section uses, each failing with the files read and the key's
// dotted path (ConfigError), and the value checks several sections share (a URL, an IP or CIDR).
import { isTable, type Table } from "./table_readers.ts";

export class ConfigError extends Error {}

export class Reader {
  constructor(private readonly files: string) {}
  fail(key: string, msg: string): never {
    throw new ConfigError(`config ${this.files}: ${key}: ${msg}`);
  }
  table(v: unknown, key: string): Table {
    if (v === undefined) return {};
    if (!isTable(v)) this.fail(key, "must be a table");
    return v;
  }
  only(t: Table, key: string, allowed: string[]) {
    for (const k of Object.keys(t)) {
      if (!allowed.includes(k)) this.fail(key ? `${key}.${k}` : k, "unknown key");
    }
  }
  str(t: Table, key: string, path: string): string | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "string") this.fail(`${path}.${key}`, "must be a string");
    return v;
  }
  bool(t: Table, key: string, path: string): boolean | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") this.fail(`${path}.${key}`, "must be true or false");
    return v;
  }
  int(
    t: Table,
    key: string,
    path: string,
    min: number,
    max = Number.MAX_SAFE_INTEGER,
  ): number | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    const n = typeof v === "bigint" ? Number(v) : v;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max) {
      this.fail(`${path}.${key}`, `must be an integer from ${min} to ${max}`);
    }
    return n;
  }
  strings(t: Table, key: string, path: string): string[] | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      this.fail(`${path}.${key}`, "must be an array of strings");
    }
    return v as string[];
  }
  /** a string or an array of strings, as a list */
  stringOrList(t: Table, key: string, path: string): string[] | undefined {
    const v = t[key];
    if (typeof v === "string") return [v];
    return this.strings(t, key, path);
  }
  regexes(t: Table, key: string, path: string): RegExp[] | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      this.fail(`${path}.${key}`, "must be an array of strings");
    }
    return (v as string[]).map((s, i) => {
      try {
        // Exclusions are full-match: anchor them so `latest` does not match `latest-rc`.
        return new RegExp(`^(?:${s})$`);
      } catch (e) {
        this.fail(`${path}.${key}[${i}]`, `invalid regex: ${(e as Error).message}`);
      }
    });
  }
}

export function isUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

export function isIpOrCidr(s: string): boolean {
  const [ip, bits, extra] = s.split("/");
  if (extra !== undefined) return false;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  const isV4 = !!v4 && v4.slice(1).every((o) => Number(o) <= 255);
  const isV6 = !isV4 && ip.includes(":") && /^[0-9a-fA-F:.]+$/.test(ip);
  if (!isV4 && !isV6) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (isV4 ? 32 : 128);
}
