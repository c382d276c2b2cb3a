// Byte ranges: the `Range` request header of blob GETs (SPEC §Blobs rules 1-7) and the
// `Content-Range` header of upload PATCHes (SPEC §Blob upload, PATCH rules).

export type RangeResult =
  | { kind: "full" } // no range, or one to ignore (rules 4, 5, 7)
  | { kind: "partial"; start: number; end: number } // inclusive end
  | { kind: "unsatisfiable" }; // rule 6

/** Interprets a blob GET `Range` header against a blob of `size` bytes. */
export function resolveRange(header: string | null, size: number): RangeResult {
  if (header === null) return { kind: "full" };
  const m = /^\s*bytes\s*=\s*(.*)$/i.exec(header);
  if (!m) return { kind: "full" }; // unknown or missing unit
  const spec = m[1].trim();
  if (spec.includes(",")) return { kind: "full" }; // multiple ranges
  const r = /^(\d*)\s*-\s*(\d*)$/.exec(spec);
  if (!r || (r[1] === "" && r[2] === "")) return { kind: "full" };
  if (size === 0) return { kind: "full" };
  if (r[1] === "") {
    const suffix = Number(r[2]);
    if (!Number.isSafeInteger(suffix)) return { kind: "full" };
    if (suffix === 0) return { kind: "unsatisfiable" };
    return { kind: "partial", start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(r[1]);
  if (!Number.isSafeInteger(start)) return { kind: "full" };
  let end = size - 1;
  if (r[2] !== "") {
    const e = Number(r[2]);
    if (!Number.isSafeInteger(e)) return { kind: "full" };
    if (e < start) return { kind: "full" }; // inverted window
    end = Math.min(e, size - 1);
  }
  if (start >= size) return { kind: "unsatisfiable" };
  return { kind: "partial", start, end };
}

/** `Content-Range: <start>-<end>` of a PATCH; the `bytes` unit is not part of this grammar. */
export function parseContentRange(header: string): { start: number; end: number } | null {
  const m = /^(\d{1,15})-(\d{1,15})$/.exec(header.trim());
  if (!m) return null;
  const start = Number(m[1]);
  const end = Number(m[2]);
  if (end < start) return null;
  return { start, end };
}

/** A non-negative decimal Content-Length, or null when it is malformed. */
export function parseContentLength(header: string): number | null {
  if (!/^\d{1,15}$/.test(header.trim())) return null;
  return Number(header.trim());
}
