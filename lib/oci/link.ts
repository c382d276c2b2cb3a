// RFC 8288 `Link` headers: the one this registry writes for the next page of a paginated listing,
// and the one it reads from upstreams and downstreams to follow theirs.

export function nextLink(
  path: string,
  params: Record<string, string | number | undefined>,
): string {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&");
  return `<${path}?${q}>; rel="next"`;
}

const isOws = (c: string) => c === " " || c === "\t";

/**
 * Splits on `sep` outside `<…>` targets and double-quoted strings (which may hold `\"`), in one
 * pass: a header is written by another server, so no step may rescan what an earlier one read.
 */
function splitLink(s: string, sep: string, angles: boolean): string[] {
  const out: string[] = [];
  let start = 0;
  let quoted = false;
  let angled = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
    } else if (angled) {
      if (c === ">") angled = false;
    } else if (c === '"') {
      quoted = true;
    } else if (c === "<" && angles) {
      angled = true;
    } else if (c === sep) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out;
}

/** A param value: a quoted-string unescaped, else the token as written; null when malformed. */
function paramValue(v: string): string | null {
  if (!v.startsWith('"')) return v;
  let i = 1;
  while (i < v.length && v[i] !== '"') i += v[i] === "\\" ? 2 : 1;
  if (i !== v.length - 1) return null; // never closed, or text after the closing quote
  return v.slice(1, -1).replace(/\\([\s\S])/g, "$1");
}

/**
 * The target of the first link whose relation types include `next` (compared as RFC 8288 says,
 * case-insensitively, among space-separated types of the first `rel` param), as written: a
 * URI-reference for the caller to resolve against the answering URL and vet. Null when there is
 * none; a link-value that is not `<target>` and params is skipped. Linear in the header: the
 * regular expression this replaces (`<([^>]*)>\s*;\s*rel="?next"?`, searched unanchored) took
 * minutes over a 400 KB header of `<`, which fetch accepts from any upstream.
 */
export function nextLinkTarget(header: string | null | undefined): string | null {
  if (!header) return null;
  for (const value of splitLink(header, ",", true)) {
    let i = 0;
    while (i < value.length && isOws(value[i])) i++;
    if (value[i] !== "<") continue;
    const close = value.indexOf(">", i + 1);
    if (close < 0) continue;
    const target = value.slice(i + 1, close);
    const [gap, ...params] = splitLink(value.slice(close + 1), ";", false);
    if (gap.trim() !== "") continue;
    const rel = params.map((p) => p.trim()).find((p) => /^rel[ \t]*(?:=|$)/i.test(p));
    if (rel === undefined) continue;
    const eq = rel.indexOf("=");
    const types = eq < 0 ? null : paramValue(rel.slice(eq + 1).trim());
    if (types?.split(/[ \t]+/).some((t) => t.toLowerCase() === "next")) return target;
  }
  return null;
}
