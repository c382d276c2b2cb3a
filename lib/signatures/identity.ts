// Identity patterns of the config (exact, or a regex anchored at both ends), compiled once.
import type { StringMatch } from "./types.ts";

const compiled = new Map<string, RegExp>();

export function matches(m: StringMatch, value: string | undefined): boolean {
  if (value === undefined) return false;
  if ("exact" in m) return m.exact === value;
  let re = compiled.get(m.regex);
  if (!re) {
    re = new RegExp(`^(?:${m.regex})$`);
    compiled.set(m.regex, re);
  }
  return re.test(value);
}
