// An upstream's tag list (`GET /v2/<name>/tags/list`, paginated by Link), which the upstream
// client of pull-through never needed. Built on lib/upstream's HTTP layer (timeouts, redirects,
// the auth dance, UpstreamError). A listing is all or nothing: a page that is not the JSON the
// distribution spec describes (an HTML page, a truncated body, a non-string or invalid tag) or
// pagination that loops or never ends fails the whole listing, so a sync never acts on half a
// list (prune would delete what the missing half holds).
import type { UpstreamConfig } from "../config/mod.ts";
import { isValidTag } from "../oci/mod.ts";
import {
  Authenticator,
  describeUrl,
  type Exchange,
  pullScope,
  readBounded,
  TokenCache,
  Transport,
} from "../upstream/mod.ts";

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

const PAGE_SIZE = 1000;
const PAGE_MAX_BYTES = 4 * 1024 * 1024;
const MAX_PAGES = 200;

export class UpstreamTags {
  readonly url: string;
  private readonly origin: string;
  private readonly t: Transport;
  private readonly auth: Authenticator;

  constructor(cfg: UpstreamConfig, tokens = new TokenCache()) {
    this.url = cfg.url.replace(/\/+$/, "");
    const base = new URL(this.url);
    this.origin = base.origin;
    const caCerts = cfg.caBundle !== null ? [Deno.readTextFileSync(cfg.caBundle)] : undefined;
    this.t = new Transport({
      upstream: this.url,
      connectTimeoutMs: cfg.connectTimeoutSecs * 1000,
      readTimeoutMs: cfg.readTimeoutSecs * 1000,
      maxRedirects: cfg.maxRedirects,
      caCerts,
      outboundAllow: cfg.outboundAllow,
    });
    const creds = cfg.username !== null && cfg.password !== null
      ? { username: cfg.username, password: cfg.password }
      : null;
    this.auth = new Authenticator(this.t, base, creds, tokens, () => {});
  }

  close(): void {
    this.t.close();
  }

  /** Every tag of `name` (the upstream's name), in the upstream's order. */
  async list(name: string): Promise<TagListing> {
    const what = `GET tags ${name}`;
    const tags: string[] = [];
    const seen = new Set<string>();
    let url: URL | null = new URL(`/v2/${name}/tags/list?n=${PAGE_SIZE}`, this.origin);
    let rateLimit: RateLimitHint | null = null;
    for (let page = 0; url !== null; page++) {
      if (page === MAX_PAGES) {
        throw this.t.error("invalid", `${what}: more than ${MAX_PAGES} pages`);
      }
      if (seen.has(url.href)) {
        throw this.t.error("invalid", `${what}: pagination loops at ${describeUrl(url)}`);
      }
      seen.add(url.href);
      const ex = await this.request(url, name, what);
      rateLimit = parseRateLimit(ex.response.headers) ?? rateLimit;
      const bytes = await readBounded(this.t, ex, PAGE_MAX_BYTES, what);
      tags.push(...this.page(bytes, what, page));
      url = this.next(ex, what);
    }
    return { tags, rateLimit };
  }

  private page(bytes: Uint8Array, what: string, page: number): string[] {
    let doc: unknown;
    try {
      doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch {
      throw this.t.error(
        "invalid",
        `${what}: page ${
          page + 1
        } is not JSON (${bytes.byteLength} bytes; truncated or not a registry?)`,
      );
    }
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
      throw this.t.error("invalid", `${what}: page ${page + 1} is not a JSON object`);
    }
    const list = (doc as Record<string, unknown>).tags;
    // distribution answers `"tags": null` for a repository whose tags were all deleted.
    if (list === null || list === undefined) return [];
    if (!Array.isArray(list)) {
      throw this.t.error("invalid", `${what}: page ${page + 1}: "tags" is not an array`);
    }
    for (const [i, t] of list.entries()) {
      if (typeof t !== "string" || !isValidTag(t)) {
        throw this.t.error(
          "invalid",
          `${what}: page ${page + 1}: tags[${i}] is not a valid tag (${
            JSON.stringify(t).slice(0, 80)
          })`,
        );
      }
    }
    return list as string[];
  }

  /** The next page from `Link: <…>; rel="next"`, on the upstream's own origin only. */
  private next(ex: Exchange, what: string): URL | null {
    const link = ex.response.headers.get("link");
    if (link === null) return null;
    const m = /<([^>]*)>\s*;[^,]*rel="?next"?/i.exec(link);
    if (!m) return null;
    let u: URL;
    try {
      u = new URL(m[1], ex.url);
    } catch {
      throw this.t.error("invalid", `${what}: malformed Link header`);
    }
    if (u.origin !== this.origin) {
      throw this.t.error("invalid", `${what}: next page on another origin (${u.origin})`);
    }
    return u;
  }

  private async request(url: URL, name: string, what: string): Promise<Exchange> {
    const scope = pullScope(name);
    const headers = { accept: "application/json" };
    const send = (authorization: string | null) =>
      this.t.send({ method: "GET", url, headers, authorization, authOrigin: this.origin, what });
    let authorization = await this.auth.preemptive(scope);
    let ex = await send(authorization);
    if (ex.response.status === 401 && ex.url.origin === this.origin) {
      const challenge = ex.response.headers.get("www-authenticate");
      await ex.discard();
      authorization = await this.auth.answer(challenge, scope, authorization, what);
      ex = await send(authorization);
    }
    if (ex.response.status >= 200 && ex.response.status < 300) return ex;
    await ex.discard();
    throw this.t.statusError(what, ex.response);
  }
}

/** `ratelimit-remaining` (Docker Hub's `N;w=W`, or the IETF draft's `N`) and `ratelimit-reset`. */
export function parseRateLimit(h: Headers): RateLimitHint | null {
  const rem = /^\s*(\d{1,12})/.exec(h.get("ratelimit-remaining") ?? "");
  if (!rem) return null;
  const reset = /^\s*(\d{1,12})\s*$/.exec(h.get("ratelimit-reset") ?? "");
  return { remaining: Number(rem[1]), resetSecs: reset ? Number(reset[1]) : null };
}
