// The layer endpoints (SPEC Layer entries 1–4, Layer file 1–7, §Layer file details): parse the
// query, call lib/index, write the answer. Bad query values are 404, as on every extension GET.
import type { Action } from "./actions.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import { type LayerIndex, typeFromName } from "../lib/index/mod.ts";
import { jsonResponse } from "./request.ts";

function path(url: URL): string {
  const all = url.searchParams.getAll("path");
  if (all.length !== 1 || all[0] === "") {
    throw new RegistryError("NAME_UNKNOWN", "exactly one non-empty path is required");
  }
  return all[0].replace(/^\.?\/+/, "").replace(/\/+$/, "");
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
  req: Request,
  url: URL,
  a: Action,
  layers: LayerIndex | undefined,
  extra: Headers,
): Promise<Response> {
  if (!layers) throw new RegistryError("NAME_UNKNOWN", "layer browsing is not enabled");
  const ns = a.namespace!;
  const digest = a.digest!;
  const head = req.method === "HEAD";
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
      const p = path(url);
      const download = url.searchParams.has("download");
      const f = await layers.file(ns, digest, p, req.headers.get("range"));
      extra.set("Content-Type", f.entry.content?.mime_type ?? typeFromName(p));
      extra.set("Content-Security-Policy", "sandbox");
      extra.set("X-Content-Type-Options", "nosniff");
      extra.set("Accept-Ranges", "bytes");
      extra.set("Content-Length", String(f.length));
      if (download) {
        const name = p.split("/").pop() || "file";
        extra.set(
          "Content-Disposition",
          `attachment; filename="${name.replace(/["\\\r\n]/g, "_")}"; filename*=UTF-8''${
            encodeURIComponent(name)
          }`,
        );
      }
      if (head) await f.body.cancel();
      if (f.range) {
        extra.set("Content-Range", `bytes ${f.range.start}-${f.range.end}/${f.entry.size}`);
        return new Response(head ? null : f.body, { status: 206, headers: extra });
      }
      return new Response(head ? null : f.body, { status: 200, headers: extra });
    }
    default:
      return jsonResponse(await layers.details(ns, digest, path(url)), extra, head);
  }
}
