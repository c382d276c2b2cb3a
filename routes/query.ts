// The one reader of query parameters. Endpoints differ in how they refuse a bad value (SPEC
// §Errors: 400 UNSUPPORTED on the OCI listings, 404 NAME_UNKNOWN on the extension GETs, 400 on the
// job mutations) and in whether a repeated parameter is malformed (extensions) or its first value
// wins (OCI endpoints, as docker-registry reads them): a Query carries both choices, so every
// reader below refuses the same way within one endpoint.
import { RegistryError, truncate } from "../lib/oci/mod.ts";

export type QueryError = (detail: string) => RegistryError;

/** The extensions' answer to a malformed query (SPEC §Errors rule 4): 404, never 400 or 5xx. */
export const extensionQueryError: QueryError = (detail) =>
  new RegistryError("NAME_UNKNOWN", detail);

export interface CountOptions {
  /** most digits accepted (larger values are malformed, not clamped) */
  digits?: number;
  /** 1: zero is malformed too */
  min?: 0 | 1;
  /** larger values are served at this size */
  max?: number;
}

export class Query {
  constructor(
    private readonly params: URLSearchParams,
    private readonly bad: QueryError = extensionQueryError,
    /** a repeated parameter is refused; otherwise its first value wins */
    private readonly strict = true,
  ) {}

  /** The same parameters refused with `bad`, repeats refused (`strict`) or first-wins. */
  refusing(bad: QueryError, strict = this.strict): Query {
    return new Query(this.params, bad, strict);
  }

  /** The first value, repeats ignored: for parameters any endpoint reads the same way. */
  first(name: string): string | null {
    return this.params.get(name);
  }

  all(name: string): string[] {
    return this.params.getAll(name);
  }

  has(name: string): boolean {
    return this.params.has(name);
  }

  /** One value: given twice is as malformed as unparseable when strict, else the first. */
  one(name: string): string | null {
    const all = this.params.getAll(name);
    if (this.strict && all.length > 1) throw this.bad(`${name} given more than once`);
    return all[0] ?? null;
  }

  /** Refuses the first of `names` given more than once (before any value is judged). */
  atMostOnce(names: readonly string[]): void {
    for (const name of names) {
      if (this.params.getAll(name).length > 1) throw this.bad(`${name} given more than once`);
    }
  }

  /** Refuses the first parameter not in `allowed`. */
  only(allowed: readonly string[]): void {
    for (const name of this.params.keys()) {
      if (!allowed.includes(name)) throw this.bad(`unknown parameter ${truncate(name)}`);
    }
  }

  /** A value matching `re`, or null when absent. */
  matching(name: string, re: RegExp, what: string): string | null {
    const v = this.one(name);
    if (v === null) return null;
    if (!re.test(v)) throw this.bad(`${name} is not ${what}: ${truncate(v)}`);
    return v;
  }

  /** A page size or offset in decimal digits; `fallback` when absent, capped at `max`. */
  count<T>(name: string, fallback: T, opts: CountOptions = {}): number | T {
    const v = this.one(name);
    if (v === null) return fallback;
    const { digits = 15, min = 0, max = Infinity } = opts;
    if (v.length > digits || !/^\d+$/.test(v) || Number(v) < min) {
      throw this.bad(`${name} must be a ${min === 1 ? "positive" : "non-negative"} integer`);
    }
    return Math.min(Number(v), max);
  }
}
