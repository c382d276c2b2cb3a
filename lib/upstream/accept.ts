// The client's `Accept` header, ordered by quality before it is forwarded upstream (SPEC §API
// version check): upstream registries pick the first type they can serve, so order is what
// carries the client's preference.
import { DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST } from "../oci/mod.ts";

export interface AcceptItem {
  /** `type/subtype`, lower-cased */
  mediaType: string;
  /** parameters other than `q`, as sent (`profile="x"`) */
  params: string[];
  /** 0 < q <= 1 */
  q: number;
}

/** Sent when the client gave no usable Accept: every manifest and index type we can store. */
export const DEFAULT_MANIFEST_ACCEPT: readonly string[] = [
  OCI_INDEX,
  OCI_MANIFEST,
  DOCKER_LIST,
  DOCKER_MANIFEST,
];

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/**
 * Splits on `sep` outside double-quoted strings (which may hold `\"` escapes), slicing rather than
 * copying character by character (a header may be hundreds of kilobytes). `open`: the last
 * quoted string never closed.
 */
function splitOutsideQuotes(s: string, sep: string): { parts: string[]; open: boolean } {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quoted && c === "\\") i++;
    else if (c === '"') quoted = !quoted;
    else if (c === sep && !quoted) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return { parts, open: quoted };
}

/**
 * Parses an Accept header: comma-separated media ranges with parameters and `q` weights
 * (default 1). Items with q=0, a malformed q, no `type/subtype` or a quoted string left open are
 * dropped; the rest are ordered by q, ties in the client's order.
 */
export function parseAccept(header: string | null | undefined): AcceptItem[] {
  if (!header) return [];
  const items: AcceptItem[] = [];
  for (const raw of splitOutsideQuotes(header, ",").parts) {
    const { parts, open } = splitOutsideQuotes(raw, ";");
    // An open quote swallows what follows it; forwarded, it would swallow the items after it.
    if (open) continue;
    const [range, ...paramParts] = parts.map((p) => p.trim());
    const slash = range.indexOf("/");
    if (slash < 0 || !TOKEN.test(range.slice(0, slash)) || !TOKEN.test(range.slice(slash + 1))) {
      continue;
    }
    let q = 1;
    let ok = true;
    const params: string[] = [];
    for (const p of paramParts) {
      if (p === "") continue;
      const eq = p.indexOf("=");
      const name = (eq < 0 ? p : p.slice(0, eq)).trim();
      if (name.toLowerCase() === "q") {
        const v = eq < 0 ? "" : p.slice(eq + 1).trim();
        if (!QVALUE.test(v)) ok = false;
        else q = Number(v);
      } else {
        params.push(p);
      }
    }
    if (!ok || q === 0) continue;
    items.push({ mediaType: range.toLowerCase(), params, q });
  }
  // Array.prototype.sort is stable, so equal weights keep the client's order.
  return items.sort((a, b) => b.q - a.q);
}

/** The Accept header to send upstream for a manifest request from a client that sent `header`. */
export function forwardAccept(header: string | null | undefined): string {
  const items = parseAccept(header);
  if (items.length === 0) return DEFAULT_MANIFEST_ACCEPT.join(", ");
  return items.map(formatAcceptItem).join(", ");
}

export function formatAcceptItem(i: AcceptItem): string {
  return [i.mediaType, ...i.params, ...(i.q < 1 ? [`q=${i.q}`] : [])].join(";");
}
