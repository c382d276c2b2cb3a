import { rangeHeaders } from "../lib/registry/mod.ts";
import type { RequestScope } from "./scope.ts";
import { bodyOf, contentLength } from "./request.ts";

export async function uploadHandler(
  { req, query, action: a, registry: reg, headers: extra, access }: RequestScope,
): Promise<Response> {
  const ns = a.namespace!;
  const withHeaders = (hs: Record<string, string>) => {
    for (const [k, v] of Object.entries(hs)) extra.set(k, v);
    return extra;
  };
  switch (a.name) {
    case "start-upload": {
      const r = await reg.uploads.start(ns, {
        digest: query.first("digest"),
        digestAlgorithm: query.first("digest-algorithm"),
        mount: query.first("mount"),
        from: query.first("from"),
        canRead: access.canMountFrom,
        body: bodyOf(req),
        contentLength: contentLength(req),
      });
      if (r.kind === "created") return created(ns, r.digest, extra);
      return new Response(null, {
        status: 202,
        headers: withHeaders(rangeHeaders(ns, r.uuid, r.offset)),
      });
    }
    case "get-upload": {
      const offset = await reg.uploads.status(ns, a.uuid!);
      return new Response(null, {
        status: 204,
        headers: withHeaders(rangeHeaders(ns, a.uuid!, offset)),
      });
    }
    case "update-upload": {
      const cl = contentLength(req);
      const offset = await reg.uploads.patch(ns, a.uuid!, {
        body: bodyOf(req),
        contentLength: cl,
        contentRange: req.headers.get("content-range"),
      });
      return new Response(null, {
        status: 202,
        headers: withHeaders(rangeHeaders(ns, a.uuid!, offset)),
      });
    }
    case "complete-upload": {
      const r = await reg.uploads.complete(ns, a.uuid!, query.first("digest"), {
        body: bodyOf(req),
        contentLength: contentLength(req),
        contentRange: req.headers.get("content-range"),
      });
      return created(ns, r.digest, extra);
    }
    default: {
      await reg.uploads.cancel(ns, a.uuid!);
      return new Response(null, { status: 204, headers: extra });
    }
  }
}

function created(ns: string, digest: string, extra: Headers): Response {
  extra.set("Location", `/v2/${ns}/blobs/${digest}`);
  extra.set("Docker-Content-Digest", digest);
  extra.set("Content-Length", "0");
  return new Response(null, { status: 201, headers: extra });
}
