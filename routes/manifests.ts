import type { RequestScope } from "./scope.ts";
import { isValidTag, RegistryError, truncate } from "../lib/oci/mod.ts";
import { bodyOf, contentLength, noRedirect } from "./request.ts";

export async function manifestHandler(
  { req, action: a, registry: reg, headers: extra, head, client, caller, access }: RequestScope,
): Promise<Response> {
  const ns = a.namespace!;
  const ref = a.reference!;
  if (a.tag !== undefined && !isValidTag(a.tag)) {
    if (req.method === "GET" || req.method === "HEAD") {
      throw new RegistryError("MANIFEST_UNKNOWN", `invalid tag ${truncate(a.tag)}`);
    }
    throw new RegistryError("UNSUPPORTED", `invalid tag ${truncate(a.tag)}`);
  }
  switch (a.name) {
    case "get-manifest": {
      // A held image (issue 34) is served to its pusher and roles granted get-held only.
      const m = await reg.readManifest(
        ns,
        ref,
        !head,
        req.headers.get("accept"),
        noRedirect(req),
        { identity: caller.auth.identity, mayViewHeld: access.canViewHeld },
      );
      if (m.warning) extra.set("Warning", m.warning);
      // A browsing read (the web UI's) says so; it is not a pull in the pull history.
      const pull = !req.headers.has("x-svc-no-pull-record");
      if (m.redirect) {
        if (pull) reg.pulls.record(ns, ref, m.digest, client);
        extra.set("Docker-Content-Digest", m.digest);
        extra.set("Location", m.redirect);
        extra.set("Cache-Control", "no-store");
        return new Response(null, { status: 307, headers: extra });
      }
      extra.set("Content-Type", m.mediaType);
      extra.set("Docker-Content-Digest", m.digest);
      extra.set("Content-Length", String(m.size));
      extra.set("ETag", `"${m.digest}"`);
      // Only a GET is a pull; HEAD is a client's existence/freshness check (as docker/distribution).
      if (!head) {
        await reg.events.notify("manifest.pull", {
          namespace: ns,
          digest: m.digest,
          reference: ref,
          tag: a.tag ?? null,
        });
        if (pull) reg.pulls.record(ns, ref, m.digest, client);
      }
      return new Response(head ? null : m.body as BodyInit, { status: 200, headers: extra });
    }
    case "put-manifest": {
      const r = await reg.manifests.put(ns, ref, {
        body: bodyOf(req),
        contentLength: contentLength(req),
        contentType: req.headers.get("content-type"),
        // the `tag` parameters of a push by digest, read and authorized at routing
        tags: a.tags ?? [],
        sourceTimestamp: req.headers.get("x-svc-source-timestamp"),
        pusher: caller.auth.identity,
      });
      // Accepted but held until its signature arrives (issue 34): its tags wait with it.
      if (r.held) extra.set("Warning", r.held);
      extra.set("Location", `/v2/${ns}/manifests/${r.digest}`);
      extra.set("Docker-Content-Digest", r.digest);
      extra.set("Content-Length", "0");
      if (r.subject) extra.set("OCI-Subject", r.subject);
      if (a.digest && r.tags.length > 0) extra.set("OCI-Tag", r.tags.join(", "));
      return new Response(null, { status: 201, headers: extra });
    }
    default: {
      await reg.manifests.delete(ns, ref, req.headers.get("x-svc-source-timestamp"), {
        // by digest: the tags authorization decided (app.ts); another found then refuses
        authorizedTags: a.digest !== undefined ? new Set(a.tags) : undefined,
      });
      return new Response(null, { status: 202, headers: extra });
    }
  }
}
