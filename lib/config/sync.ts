// `[[repository."<name>".sync]]`: scheduled pull sync of a pull-through repository (issue 24).
// Tag patterns are full-match regexes run by JavaScript's backtracking engine, so a pattern
// that can backtrack exponentially (a quantified group that itself repeats or alternates:
// `(a+)+`, `(a|aa)*`) or that needs a backreference or lookaround is refused at startup,
// naming its key; tags are at most 128 characters, so what is left stays polynomial and small.
import { bool, type Fail, int, strings, type Table } from "./table_readers.ts";

export interface SyncConfig {
  /** upstream namespaces, e.g. `library/alpine` (as named on the first upstream) */
  namespaces: string[];
  /** full-match tag patterns; empty = every tag */
  tags: RegExp[];
  intervalSecs: number;
  /** new or moved tags fetched per run; the rest wait for the next run */
  maxTagsPerRun: number;
  /** `os/architecture[/variant]` of an index's children to fetch; null = all */
  platforms: string[] | null;
  includeReferrers: boolean;
  /** delete local tags (matching `tags`) the upstream no longer lists */
  prune: boolean;
}

export const SYNC_DEFAULTS = {
  intervalSecs: 3600,
  maxTagsPerRun: 100,
  includeReferrers: true,
  prune: false,
} as const;

const MAX_PATTERN_CHARS = 1024;
const PLATFORM = /^[a-z0-9_.-]+\/[a-z0-9_.-]+(\/[a-z0-9_.-]+)?$/i;
const NAME = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/;

/** Why `src` could backtrack catastrophically (or uses a feature refused), or null when safe. */
export function unsafePattern(src: string): string | null {
  if (src.length > MAX_PATTERN_CHARS) return `longer than ${MAX_PATTERN_CHARS} characters`;
  // One frame per open group: did anything inside repeat or alternate?
  const frames: { repeats: boolean; alternates: boolean }[] = [{
    repeats: false,
    alternates: false,
  }];
  const top = () => frames[frames.length - 1];
  /** the quantifier at `i`: its length and whether it repeats more than once (0: none) */
  const quantifier = (i: number): { len: number; many: boolean } => {
    const c = src[i];
    if (c === "*" || c === "+") return { len: lazy(i + 1, 1), many: true };
    if (c === "?") return { len: lazy(i + 1, 1), many: false };
    if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
      if (m) {
        const max = m[2] === undefined ? Number(m[1]) : m[3] === "" ? Infinity : Number(m[3]);
        return { len: lazy(i + m[0].length, m[0].length), many: max > 1 };
      }
    }
    return { len: 0, many: false };
  };
  const lazy = (at: number, len: number) => src[at] === "?" ? len + 1 : len;
  for (let i = 0; i < src.length;) {
    const c = src[i];
    if (c === "\\") {
      if (/[1-9k]/.test(src[i + 1] ?? "")) return "backreferences are not allowed";
      i += 2;
    } else if (c === "[") {
      // A class is one atom; `]` right after `[` or `[^` is a literal in it.
      let j = i + 1;
      if (src[j] === "^") j++;
      if (src[j] === "]") j++;
      while (j < src.length && src[j] !== "]") j += src[j] === "\\" ? 2 : 1;
      i = j + 1;
    } else if (c === "(") {
      if (/^\(\?<?[=!]/.test(src.slice(i))) return "lookaround is not allowed";
      frames.push({ repeats: false, alternates: false });
      i++;
      continue;
    } else if (c === ")") {
      if (frames.length === 1) return "unbalanced )";
      const inner = frames.pop()!;
      const q = quantifier(i + 1);
      if (q.many && (inner.repeats || inner.alternates)) {
        return "a repeated group contains a repetition or alternation (nested quantifiers " +
          "backtrack exponentially)";
      }
      if (inner.repeats || q.len > 0) top().repeats = true;
      i += 1 + q.len;
      continue;
    } else if (c === "|") {
      top().alternates = true;
      i++;
      continue;
    } else {
      i++;
    }
    const q = quantifier(i);
    if (q.len > 0) {
      top().repeats = true;
      i += q.len;
    }
  }
  return frames.length === 1 ? null : "unbalanced (";
}

/** `[[repository."<name>".sync]]` entries (`path` names the key in errors). */
export function readSyncs(v: unknown, path: string, fail: Fail): SyncConfig[] {
  if (v === undefined) return [];
  const items = Array.isArray(v) ? v : [v];
  return items.map((item, i) => {
    const p = `${path}[${i}]`;
    if (typeof item !== "object" || item === null || Array.isArray(item)) {
      fail(p, "must be a table");
    }
    const t = item as Table;
    const allowed = [
      "namespaces",
      "tags",
      "interval_secs",
      "max_tags_per_run",
      "platforms",
      "include_referrers",
      "prune",
    ];
    for (const k of Object.keys(t)) if (!allowed.includes(k)) fail(`${p}.${k}`, "unknown key");
    const namespaces = strings(t, "namespaces", p, fail) ?? [];
    if (namespaces.length === 0) fail(`${p}.namespaces`, "is required: upstream namespaces");
    namespaces.forEach((n, j) => {
      if (n.length > 255 || !NAME.test(n)) {
        fail(`${p}.namespaces[${j}]`, `"${n}" is not a repository name`);
      }
    });
    const tags = (strings(t, "tags", p, fail) ?? []).map((s, j) => {
      const why = unsafePattern(s);
      if (why) fail(`${p}.tags[${j}]`, `refused regex ${JSON.stringify(s)}: ${why}`);
      try {
        return new RegExp(`^(?:${s})$`);
      } catch (e) {
        fail(`${p}.tags[${j}]`, `invalid regex: ${(e as Error).message}`);
      }
    });
    const platforms = strings(t, "platforms", p, fail) ?? null;
    platforms?.forEach((s, j) => {
      if (!PLATFORM.test(s)) fail(`${p}.platforms[${j}]`, `"${s}" is not os/arch[/variant]`);
    });
    return {
      namespaces,
      tags,
      intervalSecs: int(t, "interval_secs", p, 1, 366 * 86400, fail) ?? SYNC_DEFAULTS.intervalSecs,
      maxTagsPerRun: int(t, "max_tags_per_run", p, 1, 10_000, fail) ??
        SYNC_DEFAULTS.maxTagsPerRun,
      platforms,
      includeReferrers: bool(t, "include_referrers", p, fail) ?? SYNC_DEFAULTS.includeReferrers,
      prune: bool(t, "prune", p, fail) ?? SYNC_DEFAULTS.prune,
    };
  });
}
