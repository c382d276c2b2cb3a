// The `/v2/_svc/` listings: parse the query, call lib/registry, write JSON. SPEC §Errors rule 4:
// a bad query value on an extension listing is 404, never 400 or 5xx.
import { PULLS_DEFAULT_N } from "../lib/registry/mod.ts";
import { isValidTag, parseDigest, truncate } from "../lib/oci/mod.ts";
import { extensionQueryError, type Query } from "./query.ts";
import type { RequestScope } from "./scope.ts";
import { jsonResponse } from "./request.ts";

/** Exactly one of `tag` or `digest`, well-formed. */
function pullTarget(query: Query): string {
  const bad = extensionQueryError;
  const tag = query.one("tag");
  const digest = query.one("digest");
  if (tag !== null && digest !== null) throw bad("give tag or digest, not both");
  if (tag) {
    if (!isValidTag(tag)) throw bad(`invalid tag ${truncate(tag)}`);
    return tag;
  }
  if (digest) {
    const d = parseDigest(digest);
    if (!d) throw bad(`invalid digest ${truncate(digest)}`);
    return digest;
  }
  throw bad("a tag or digest is required");
}

export async function svcHandler(
  { query, action: a, registry: reg, headers: extra, head, access }: RequestScope,
): Promise<Response> {
  switch (a.name) {
    case "list-repositories":
      return jsonResponse(
        a.resource === "configured"
          ? await reg.svc.configuredRepositories(access.canListTags)
          : await reg.svc.repositories(access.canListTags),
        extra,
        head,
      );
    case "list-namespaces":
      return jsonResponse(
        await reg.svc.namespaces(query.one("repository"), access.canListTags),
        extra,
        head,
      );
    case "list-uploads":
      return jsonResponse(await reg.svc.uploads(a.namespace!), extra, head);
    case "ui-config":
      return jsonResponse(reg.svc.uiConfig(), extra, head);
    default: {
      if (a.resource !== "pulls") {
        return jsonResponse(await reg.svc.revisions(a.namespace!), extra, head);
      }
      const target = pullTarget(query);
      const n = query.count("n", PULLS_DEFAULT_N);
      const offset = query.count("offset", 0);
      return jsonResponse(await reg.pulls.list(a.namespace!, target, offset, n), extra, head);
    }
  }
}
