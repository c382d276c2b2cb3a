import type { RequestScope } from "./scope.ts";
import { nextLink, OCI_INDEX, RegistryError } from "../lib/oci/mod.ts";
import { jsonResponse } from "./request.ts";

/** OCI listings refuse a bad `n` with 400, and read the first of repeated values. */
const unsupported = (detail: string) => new RegistryError("UNSUPPORTED", detail);
const PAGE_DIGITS = 9;
const CATALOG_DEFAULT_N = 100;
const CATALOG_MAX_N = 10_000;

export async function listingHandler(
  { query, action: a, registry: reg, headers: extra, head, access }: RequestScope,
): Promise<Response> {
  const q = query.refusing(unsupported, false);
  const last = q.first("last");
  switch (a.name) {
    case "list-tags": {
      const n = q.count("n", -1, { digits: PAGE_DIGITS });
      const ns = a.namespace!;
      const page = await reg.listings.tags(ns, n < 0 ? null : n, last);
      if (page.more) {
        extra.set("Link", nextLink(`/v2/${ns}/tags/list`, { n, last: page.tags.at(-1) }));
      }
      return jsonResponse({ name: ns, tags: page.tags }, extra, head);
    }
    case "list-catalog": {
      const size = q.count("n", CATALOG_DEFAULT_N, { digits: PAGE_DIGITS, max: CATALOG_MAX_N });
      // SPEC §Catalog: a namespace is listed only when the caller could list its tags.
      const page = await reg.listings.catalog(size, last, access.canListTags);
      if (page.more) {
        extra.set("Link", nextLink("/v2/_catalog", { n: size, last: page.names.at(-1) }));
      }
      return jsonResponse({ repositories: page.names }, extra, head);
    }
    default: {
      const ns = a.namespace!;
      const artifactType = q.first("artifactType");
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
