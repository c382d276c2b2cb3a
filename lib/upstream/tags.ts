// An upstream's tag list pages (`GET /v2/<name>/tags/list`, paginated by Link), as the scheduled
// pull sync reads them through UpstreamClient.listTags. A page that is not the JSON the
// distribution spec describes (an HTML page, a truncated body, a non-string or invalid tag)
// fails the whole listing: a sync never acts on half a list (prune would delete what the
// missing half holds).
import { isValidTag } from "../oci/mod.ts";
import type { Transport } from "./transport.ts";

/** What the upstream said of its rate limit (Docker Hub: `ratelimit-remaining: 76;w=21600`). */
export interface RateLimitHint {
  remaining: number;
  /** seconds until the window resets, when the upstream said */
  resetSecs: number | null;
}

export interface TagListing {
  tags: string[];
  rateLimit: RateLimitHint | null;
}

/** The tags of one page; `page` counts from 0. */
export function tagsPage(t: Transport, bytes: Uint8Array, what: string, page: number): string[] {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw t.error(
      "invalid",
      `${what}: page ${
        page + 1
      } is not JSON (${bytes.byteLength} bytes; truncated or not a registry?)`,
    );
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw t.error("invalid", `${what}: page ${page + 1} is not a JSON object`);
  }
  const list = (doc as Record<string, unknown>).tags;
  // distribution answers `"tags": null` for a repository whose tags were all deleted.
  if (list === null || list === undefined) return [];
  if (!Array.isArray(list)) {
    throw t.error("invalid", `${what}: page ${page + 1}: "tags" is not an array`);
  }
  for (const [i, tag] of list.entries()) {
    if (typeof tag !== "string" || !isValidTag(tag)) {
      throw t.error(
        "invalid",
        `${what}: page ${page + 1}: tags[${i}] is not a valid tag (${
          JSON.stringify(tag).slice(0, 80)
        })`,
      );
    }
  }
  return list as string[];
}

/** `ratelimit-remaining` (Docker Hub's `N;w=W`, or the IETF draft's `N`) and `ratelimit-reset`. */
export function parseRateLimit(h: Headers): RateLimitHint | null {
  const rem = /^\s*(\d{1,12})/.exec(h.get("ratelimit-remaining") ?? "");
  if (!rem) return null;
  const reset = /^\s*(\d{1,12})\s*$/.exec(h.get("ratelimit-reset") ?? "");
  return { remaining: Number(rem[1]), resetSecs: reset ? Number(reset[1]) : null };
}
