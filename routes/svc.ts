// The `/v2/_svc/` listings: parse the query, call lib/registry, write JSON. SPEC §Errors rule 4:
// a bad query value on an extension listing is 404, never 400 or 5xx.
import type { Action } from "./actions.ts";
import type { Handlers } from "./app.ts";
import { PULLS_DEFAULT_N, type Registry } from "../lib/registry/mod.ts";
import { isValidTag, parseDigest, RegistryError, truncate } from "../lib/oci/mod.ts";
import { jsonResponse } from "./request.ts";

const badQuery = (detail: string) => new RegistryError("NAME_UNKNOWN", detail);

/** A parameter given at most once; repeated is as malformed as unparseable. */
function single(url: URL, name: string): string | null {
  const all = url.searchParams.getAll(name);
  if (all.length > 1) throw badQuery(`${name} given more than once`);
  return all[0] ?? null;
}

function count(url: URL, name: string, fallback: number): number {
  const v = single(url, name);
  if (v === null) return fallback;
  if (!/^\d{1,15}$/.test(v)) throw badQuery(`${name} must be a non-negative integer`);
  return Number(v);
}

/** Exactly one of `tag` or `digest`, well-formed. */
function pullTarget(url: URL): string {
  const tag = single(url, "tag");
  const digest = single(url, "digest");
  if (tag !== null && digest !== null) throw badQuery("give tag or digest, not both");
  if (tag) {
    if (!isValidTag(tag)) throw badQuery(`invalid tag ${truncate(tag)}`);
    return tag;
  }
  if (digest) {
    const d = parseDigest(digest);
    if (!d) throw badQuery(`invalid digest ${truncate(digest)}`);
    return digest;
  }
  throw badQuery("a tag or digest is required");
}

export async function svcHandler(
  req: Request,
  url: URL,
  a: Action,
  reg: Registry,
  extra: Headers,
  h: Handlers,
): Promise<Response> {
  const head = req.method === "HEAD";
  switch (a.name) {
    case "list-repositories":
      return jsonResponse(await reg.svc.repositories(h.canListTags), extra, head);
    case "list-namespaces":
      return jsonResponse(
        await reg.svc.namespaces(single(url, "repository"), h.canListTags),
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
      const target = pullTarget(url);
      const n = count(url, "n", PULLS_DEFAULT_N);
      const offset = count(url, "offset", 0);
      return jsonResponse(await reg.pulls.list(a.namespace!, target, offset, n), extra, head);
    }
  }
}
