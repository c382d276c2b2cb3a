// `GET /v2/_svc/files/search` (docs/api.md#file-search): which images anywhere hold a file,
// by content digest, exact path, basename or basename pattern (`hello*`, `*.sh`). Each result is shown only to a caller who may read
// the layer (get-blob) and list the namespace's tags (list-tags), as the catalog filters.
import { RegistryError } from "../lib/oci/mod.ts";
import {
  isNamePattern,
  MAX_NAME_PATTERN,
  MAX_PATH,
  parseNamePattern,
  searchableLength,
  type SearchField,
  utf8Length,
} from "../lib/index/mod.ts";
import { jsonResponse } from "./request.ts";
import { extensionQueryError } from "./query.ts";
import type { RequestScope } from "./scope.ts";

const badQuery = extensionQueryError;
export const SEARCH_DEFAULT_N = 100;
export const SEARCH_MAX_N = 1000;

export async function filesSearchHandler(
  { url, query, services, headers: extra, head, access }: RequestScope,
): Promise<Response> {
  const { canRead, canListTags } = access;
  const given = (["sha256", "path", "name"] as SearchField[])
    .map((f) => [f, query.one(f)] as const)
    .filter(([, v]) => v !== null) as [SearchField, string][];
  if (given.length !== 1) throw badQuery("exactly one of sha256, path or name is required");
  let [field, value] = given[0];
  if (field === "sha256") {
    value = value.toLowerCase().replace(/^sha256:/, "");
    if (!/^[0-9a-f]{64}$/.test(value)) throw badQuery("sha256 must be 64 hex digits");
  } else if (field === "path") {
    value = value.replace(/^\.?\/+/, "").replace(/\/+$/, "");
    if (!value || value.split("/").includes("..")) {
      throw badQuery("path must be a non-empty path inside a layer");
    }
    // Longer paths are never entered: an answer could only be empty.
    if (!searchableLength(value)) throw badQuery(`path is longer than ${MAX_PATH} bytes`);
  } else if (!value || value.includes("/")) {
    throw badQuery("name must be a basename (no /)");
  } else if (isNamePattern(value)) {
    if (utf8Length(value, MAX_NAME_PATTERN) > MAX_NAME_PATTERN) {
      throw badQuery(`a name pattern is at most ${MAX_NAME_PATTERN} bytes`);
    }
    if (!parseNamePattern(value)) {
      throw badQuery("a name pattern needs a literal start or end (hello*, *.sh)");
    }
  } else if (!searchableLength(value)) throw badQuery(`name is longer than ${MAX_PATH} bytes`);
  const n = query.count("n", SEARCH_DEFAULT_N, { digits: 9, min: 1, max: SEARCH_MAX_N });
  const next = query.one("next");
  if (next !== null && !/^[A-Za-z0-9+/=_-]{1,4096}$/.test(next)) throw badQuery("invalid next");
  let page;
  try {
    page = await services.searchFiles(
      field,
      value,
      n,
      next ?? undefined,
      (ns, layer) => Promise.resolve(canRead(ns, layer) && canListTags(ns)),
    );
  } catch (e) {
    // A cursor KV cannot decode (or one from another query) is a bad query value.
    if (next !== null && e instanceof Error && !(e instanceof RegistryError)) {
      throw badQuery("invalid next");
    }
    throw e;
  }
  if (page.next) {
    const u = new URL(url);
    u.searchParams.set("next", page.next);
    extra.set("Link", `<${u.pathname}${u.search}>; rel="next"`);
  }
  return jsonResponse(page, extra, head);
}
