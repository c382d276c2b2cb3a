import type { Action } from "./actions.ts";
import type { Handlers } from "./app.ts";
import type { Registry } from "../lib/registry/mod.ts";
import { nextLink, OCI_INDEX, parsePageSize, RegistryError } from "../lib/oci/mod.ts";
import { jsonResponse } from "./request.ts";

const badN = () => new RegistryError("UNSUPPORTED", "n must be a non-negative integer");
const CATALOG_DEFAULT_N = 100;
const CATALOG_MAX_N = 10_000;

export async function listingHandler(
  req: Request,
  url: URL,
  a: Action,
  reg: Registry,
  extra: Headers,
  h: Handlers,
): Promise<Response> {
  const head = req.method === "HEAD";
  const last = url.searchParams.get("last");
  switch (a.name) {
    case "list-tags": {
      const n = parsePageSize(url.searchParams.get("n"), -1);
      if (n === null) throw badN();
      const ns = a.namespace!;
      const page = await reg.listings.tags(ns, n < 0 ? null : n, last);
      if (page.more) {
        extra.set("Link", nextLink(`/v2/${ns}/tags/list`, { n, last: page.tags.at(-1) }));
      }
      return jsonResponse({ name: ns, tags: page.tags }, extra, head);
    }
    case "list-catalog": {
      const n = parsePageSize(url.searchParams.get("n"), CATALOG_DEFAULT_N);
      if (n === null) throw badN();
      const size = Math.min(n, CATALOG_MAX_N);
      // SPEC §Catalog: a namespace is listed only when the caller could list its tags.
      const page = await reg.listings.catalog(size, last, h.canListTags);
      if (page.more) {
        extra.set("Link", nextLink("/v2/_catalog", { n: size, last: page.names.at(-1) }));
      }
      return jsonResponse({ repositories: page.names }, extra, head);
    }
    default: {
      const ns = a.namespace!;
      const artifactType = url.searchParams.get("artifactType");
      const subject = a.digest ?? a.reference!;
      const page = await reg.referrers(ns, subject, artifactType, last);
      if (artifactType !== null) extra.set("OCI-Filters-Applied", "artifactType");
      if (page.next) {
        extra.set(
          "Link",
          nextLink(`/v2/${ns}/referrers/${subject}`, {
            last: page.next,
            artifactType: artifactType ?? undefined,
          }),
        );
      }
      return jsonResponse(
        { schemaVersion: 2, mediaType: OCI_INDEX, manifests: page.manifests },
        extra,
        head,
        OCI_INDEX,
      );
    }
  }
}
