import type { RequestScope } from "./scope.ts";
import { rangeNotSatisfiable } from "../lib/oci/mod.ts";
import { noRedirect } from "./request.ts";

export async function blobHandler(
  { req, action: a, registry: reg, headers: extra, head, sent }: RequestScope,
): Promise<Response> {
  const ns = a.namespace!;
  const digest = a.digest!;
  if (a.name === "delete-blob") {
    await reg.blobs.delete(ns, digest);
    return new Response(null, { status: 202, headers: extra });
  }
  // HEAD never redirects: it has no body to fetch elsewhere.
  const r = await reg.readBlob(ns, digest, req.headers.get("range"), !head, noRedirect(req), sent);
  extra.set("Docker-Content-Digest", digest);
  if (r.redirect) {
    extra.set("Location", r.redirect);
    extra.set("Cache-Control", "no-store");
    return new Response(null, { status: 307, headers: extra });
  }
  extra.set("Accept-Ranges", "bytes");
  extra.set("Content-Type", "application/octet-stream");
  extra.set("ETag", `"${digest}"`);
  if (r.upstream) {
    if (r.upstream.contentRange) extra.set("Content-Range", r.upstream.contentRange);
    if (r.size !== null) extra.set("Content-Length", String(r.size));
    return new Response(head ? null : r.stream, { status: r.upstream.status, headers: extra });
  }
  // A range is judged unsatisfiable only against a known size.
  if (r.range.kind === "unsatisfiable") throw rangeNotSatisfiable(r.size!);
  if (r.range.kind === "partial") {
    extra.set("Content-Range", `bytes ${r.range.start}-${r.range.end}/${r.size}`);
    extra.set("Content-Length", String(r.range.end - r.range.start + 1));
    return new Response(head ? null : r.stream, { status: 206, headers: extra });
  }
  if (r.size !== null) extra.set("Content-Length", String(r.size));
  return new Response(head ? null : r.stream, { status: 200, headers: extra });
}
