// The layer endpoints (SPEC Layer entries 1–4, Layer file 1–7, §Layer file details): parse the
// query, call lib/index, write the answer. Bad query values are 404, as on every extension GET.
import { RegistryError } from "../lib/oci/mod.ts";
import { typeFromName } from "../lib/index/mod.ts";
import { jsonResponse } from "./request.ts";
import type { Query } from "./query.ts";
import type { RequestScope } from "./scope.ts";

/**
 * The `path` parameter in the listing's spelling: empty and `.` segments dropped, as the index
 * drops them from entry names. A `..` segment is refused whatever the layer holds: an entry so
 * named (a hostile tar can carry `../../etc/passwd`) is never served, so no read even looks as
 * if it left the layer.
 */
function path(query: Query): string {
  const all = query.all("path");
  if (all.length !== 1 || all[0] === "") {
    throw new RegistryError("NAME_UNKNOWN", "exactly one non-empty path is required");
  }
  const segments = all[0].split("/").filter((s) => s !== "" && s !== ".");
  if (segments.length === 0 || segments.includes("..")) {
    throw new RegistryError("NAME_UNKNOWN", "path must name a file inside the layer (no ..)");
  }
  return segments.join("/");
}

/** RFC 8187 attr-char: what an ext-value carries as itself; every other byte is %XX. */
const ATTR_CHAR = /^[A-Za-z0-9!#$&+\-.^_`|~]$/;
/** A saved file's name stops here (most filesystems' limit); a 1 MiB name is no header. */
const MAX_FILENAME = 255;

/**
 * `attachment` with the file's basename per RFC 6266: `filename` an ASCII fallback (every
 * character outside printable ASCII, and `"`, `\` and `%`, as `_`: a control character in a
 * header value made Deno's HTTP writer panic, a non-Latin-1 one made Headers throw) and
 * `filename*` the UTF-8 name percent-encoded (RFC 8187), lone surrogates as U+FFFD.
 */
export function contentDisposition(filePath: string): string {
  let name = filePath.slice(filePath.lastIndexOf("/") + 1) || "file";
  name = name.slice(0, MAX_FILENAME).toWellFormed();
  let ascii = "";
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    ascii += c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c && c !== 0x25 ? name[i] : "_";
  }
  let ext = "";
  for (const b of new TextEncoder().encode(name)) {
    const ch = String.fromCharCode(b);
    ext += b < 0x80 && ATTR_CHAR.test(ch)
      ? ch
      : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return `attachment; filename="${ascii}"; filename*=UTF-8''${ext}`;
}

/** RFC 9110 §12.5.3: `gzip` or `*` with a non-zero quality. */
export function acceptsGzip(header: string | null): boolean {
  let star = false;
  for (const part of (header ?? "").split(",")) {
    const [coding, ...params] = part.trim().toLowerCase().split(";").map((s) => s.trim());
    const q = params.find((p) => p.startsWith("q="));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    const ok = Number.isFinite(quality) && quality > 0;
    if (coding === "gzip" || coding === "x-gzip") return ok;
    if (coding === "*") star = ok;
  }
  return star;
}

export async function layerHandler(
  { req, query, action: a, services: { layers }, headers: extra, head }: RequestScope,
): Promise<Response> {
  if (!layers) throw new RegistryError("NAME_UNKNOWN", "layer browsing is not enabled");
  const ns = a.namespace!;
  const digest = a.digest!;
  switch (a.resource) {
    case "layer-entries": {
      const r = await layers.entries(ns, digest, acceptsGzip(req.headers.get("accept-encoding")));
      if (r.status === 202) {
        extra.set("Content-Type", "application/json");
        extra.set("Retry-After", "1");
        return new Response(head ? null : JSON.stringify({ status: "indexing" }), {
          status: 202,
          headers: extra,
        });
      }
      extra.set("Content-Type", "application/json");
      extra.set("Vary", "Accept-Encoding");
      if (r.gzipped) extra.set("Content-Encoding", "gzip");
      if (r.length !== undefined) extra.set("Content-Length", String(r.length));
      if (head) await r.body.cancel();
      return new Response(head ? null : r.body, { status: 200, headers: extra });
    }
    case "layer-file": {
      const p = path(query);
      const download = query.has("download");
      const f = await layers.file(ns, digest, p, req.headers.get("range"));
      extra.set("Content-Type", f.entry.content?.mime_type ?? typeFromName(p));
      extra.set("Content-Security-Policy", "sandbox");
      extra.set("X-Content-Type-Options", "nosniff");
      extra.set("Accept-Ranges", "bytes");
      extra.set("Content-Length", String(f.length));
      if (download) extra.set("Content-Disposition", contentDisposition(p));
      if (head) await f.body.cancel();
      if (f.range) {
        extra.set("Content-Range", `bytes ${f.range.start}-${f.range.end}/${f.entry.size}`);
        return new Response(head ? null : f.body, { status: 206, headers: extra });
      }
      return new Response(head ? null : f.body, { status: 200, headers: extra });
    }
    default:
      return jsonResponse(await layers.details(ns, digest, path(query)), extra, head);
  }
}
