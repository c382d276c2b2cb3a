// One upstream registry, as a pull-through cache reads it: manifests (verified against their
// digest before anyone sees them), blobs (streamed, never buffered) and referrers.
import type { UpstreamConfig } from "../config/mod.ts";
import {
  bareMediaType,
  type Descriptor,
  isValidName,
  isValidTag,
  OCI_INDEX,
  parseDigest,
} from "../oci/mod.ts";
import { forwardAccept } from "./accept.ts";
import { Authenticator } from "./auth.ts";
import { isUpstreamError, UpstreamError, type UpstreamErrorKind } from "./errors.ts";
import { declaredLength } from "./body.ts";
import { apiUrl, pullScope } from "./paths.ts";
import { nextPage, referrersPage } from "./referrers.ts";
import { parseRateLimit, type TagListing, tagsPage } from "./tags.ts";
import { TokenCache } from "./token_cache.ts";
import { type Exchange, readBounded, Transport } from "./transport.ts";
import { manifestDigest, namesOtherContent } from "./verify.ts";

export type UpstreamOp =
  | "head-manifest"
  | "get-manifest"
  | "head-blob"
  | "get-blob"
  /** a getBlob body, observed when it ends (its seconds include the transfer) */
  | "blob-body"
  | "get-referrers"
  | "list-tags"
  | "token";

export type UpstreamOutcome = "ok" | UpstreamErrorKind;

/** Called once per operation; lib/upstream stays free of lib/metrics, main.ts wires the two. */
export type ObserveFn = (
  upstreamUrl: string,
  op: UpstreamOp,
  outcome: UpstreamOutcome,
  seconds: number,
) => void;

export interface UpstreamClientOptions {
  /** shared by the clients of a set; keyed by upstream URL and scope */
  tokenCache?: TokenCache;
  observe?: ObserveFn;
  /** bound of the GET that completes a HEAD missing a digest, type or size (default 4 MiB) */
  maxManifestBytes?: number;
  /** bound of one page of referrers (default 4 MiB) */
  maxReferrersBytes?: number;
}

export interface ManifestHead {
  digest: string;
  mediaType: string;
  size: number;
}

export interface FetchedManifest {
  /** exactly as the upstream served them */
  bytes: Uint8Array;
  /** Content-Type without parameters (the body's mediaType when the header is absent) */
  mediaType: string;
  /** the reference for a digest pull; sha256 of the bytes for a tag */
  digest: string;
}

export interface BlobResponse {
  /** 206 answers a forwarded Range; 200 is the whole blob (also when the Range was ignored) */
  status: 200 | 206;
  /** Content-Length, when the upstream sent one */
  size?: number;
  /** the upstream's Content-Range of a 206, passed through */
  contentRange?: string;
  /** errors on a stall past the read timeout, or bytes short of or beyond Content-Length */
  body: ReadableStream<Uint8Array>;
}

const DEFAULT_MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_REFERRER_PAGES = 100;
const TAG_PAGE_SIZE = 1000;
const TAG_PAGE_MAX_BYTES = 4 * 1024 * 1024;
const MAX_TAG_PAGES = 200;

export class UpstreamClient {
  /** the configured URL, without trailing slashes */
  readonly url: string;
  private readonly origin: string;
  private readonly t: Transport;
  private readonly auth: Authenticator;
  private readonly observeFn?: ObserveFn;
  private readonly maxManifestBytes: number;
  private readonly maxReferrersBytes: number;

  /** Reads `config.caBundle` now, so a missing file fails at startup rather than per pull. */
  constructor(config: UpstreamConfig, options: UpstreamClientOptions = {}) {
    this.url = config.url.replace(/\/+$/, "");
    const base = new URL(this.url);
    this.origin = base.origin;
    let caCerts: string[] | undefined;
    if (config.caBundle !== null) {
      try {
        caCerts = [Deno.readTextFileSync(config.caBundle)];
      } catch (e) {
        throw new UpstreamError(
          "invalid",
          this.url,
          `cannot read ca_bundle ${config.caBundle}: ${e instanceof Error ? e.message : e}`,
        );
      }
    }
    this.t = new Transport({
      upstream: this.url,
      connectTimeoutMs: config.connectTimeoutSecs * 1000,
      readTimeoutMs: config.readTimeoutSecs * 1000,
      maxRedirects: config.maxRedirects,
      caCerts,
      outboundAllow: config.outboundAllow,
    });
    const creds = config.username !== null && config.password !== null
      ? { username: config.username, password: config.password }
      : null;
    this.observeFn = options.observe;
    this.auth = new Authenticator(
      this.t,
      base,
      creds,
      options.tokenCache ?? new TokenCache(),
      (err, started) => this.emit("token", err, started),
    );
    this.maxManifestBytes = options.maxManifestBytes ?? DEFAULT_MAX_MANIFEST_BYTES;
    this.maxReferrersBytes = options.maxReferrersBytes ?? DEFAULT_MAX_MANIFEST_BYTES;
  }

  close(): void {
    this.t.close();
  }

  /** Digest, type and size of a manifest; `accept` is the client's Accept header. */
  headManifest(name: string, reference: string, accept?: string | null): Promise<ManifestHead> {
    return this.observed("head-manifest", async () => {
      const what = `HEAD manifest ${name}:${reference}`;
      const digestRef = this.checkReference(name, reference);
      const ex = await this.manifestRequest("HEAD", name, reference, accept, what);
      await ex.discard();
      const announced = this.announcedDigest(ex.response, what);
      if (digestRef) this.checkAnnounced(what, reference, announced);
      // A tag's digest is its sha256 everywhere in Wharf (getManifest computes that one).
      const digest = digestRef ? reference : announced?.startsWith("sha256:") ? announced : null;
      const mediaType = contentType(ex.response);
      const size = declaredLength(ex.response);
      if (digest !== null && mediaType !== null && size !== null) {
        return { digest, mediaType, size };
      }
      // Some registries leave HEAD bare; the body answers every question (and is verified).
      const m = await this.fetchManifest(name, reference, accept, this.maxManifestBytes);
      return { digest: m.digest, mediaType: m.mediaType, size: m.bytes.byteLength };
    });
  }

  /** The manifest bytes, at most `maxBytes`, verified against their digest. */
  getManifest(
    name: string,
    reference: string,
    accept: string | null | undefined,
    maxBytes: number,
  ): Promise<FetchedManifest> {
    return this.observed(
      "get-manifest",
      () => this.fetchManifest(name, reference, accept, maxBytes),
    );
  }

  headBlob(name: string, digest: string): Promise<{ size: number }> {
    return this.observed("head-blob", async () => {
      const what = `HEAD blob ${name}@${digest}`;
      this.checkDigest(name, digest);
      const ex = await this.request(
        "HEAD",
        apiUrl(this.url, name, "blobs", digest),
        {},
        name,
        what,
      );
      await ex.discard();
      this.checkAnnounced(what, digest, this.announcedDigest(ex.response, what));
      const size = declaredLength(ex.response);
      if (size === null) throw this.t.error("invalid", `${what}: no Content-Length`);
      return { size };
    });
  }

  /**
   * The blob's bytes as a stream; `range` (a client's Range header) is forwarded verbatim.
   * The bytes are NOT checked against `digest`: wrap the body in verifyDigest where needed.
   */
  getBlob(name: string, digest: string, range?: string): Promise<BlobResponse> {
    return this.observed("get-blob", async () => {
      const what = `GET blob ${name}@${digest}`;
      this.checkDigest(name, digest);
      const headers: Record<string, string> = range === undefined ? {} : { range };
      const ex = await this.request(
        "GET",
        apiUrl(this.url, name, "blobs", digest),
        headers,
        name,
        what,
      );
      const status = ex.response.status;
      const contentRange = ex.response.headers.get("content-range");
      if (status !== 200 && status !== 206) {
        await ex.discard();
        throw this.t.error("invalid", `${what}: unexpected status ${status}`, { status });
      }
      if (status === 206 && contentRange === null) {
        await ex.discard();
        throw this.t.error("invalid", `${what}: 206 without Content-Range`, { status });
      }
      const started = performance.now();
      const out: BlobResponse = {
        status,
        body: ex.body((err) => this.emit("blob-body", err, started)),
      };
      const size = declaredLength(ex.response);
      if (size !== null) out.size = size;
      if (status === 206) out.contentRange = contentRange!;
      return out;
    });
  }

  /**
   * Descriptors of the manifests whose subject is `digest`, following the upstream's pages.
   * `artifactType` is sent and also applied here, as upstreams may ignore it. An upstream
   * without the referrers API (404) has none.
   */
  getReferrers(name: string, digest: string, artifactType?: string): Promise<Descriptor[]> {
    return this.observed("get-referrers", async () => {
      const what = `GET referrers ${name}@${digest}`;
      this.checkDigest(name, digest);
      let url: URL | null = apiUrl(this.url, name, "referrers", digest);
      if (artifactType !== undefined) url.searchParams.set("artifactType", artifactType);
      const out: Descriptor[] = [];
      for (let page = 0; url !== null; page++) {
        if (page === MAX_REFERRER_PAGES) {
          throw this.t.error("invalid", `${what}: more than ${MAX_REFERRER_PAGES} pages`);
        }
        let ex: Exchange;
        try {
          ex = await this.request("GET", url, { accept: OCI_INDEX }, name, what);
        } catch (e) {
          if (page === 0 && isUpstreamError(e) && e.kind === "not-found") return [];
          throw e;
        }
        const bytes = await readBounded(this.t, ex, this.maxReferrersBytes, what);
        out.push(...referrersPage(this.t, bytes, what));
        url = nextPage(this.t, ex, this.origin, what);
      }
      return artifactType === undefined ? out : out.filter((d) => d.artifactType === artifactType);
    });
  }

  /**
   * Every tag of `name`, in the upstream's order, following its pages (a loop, another origin or
   * more than MAX_TAG_PAGES pages fail the listing), with the last rate-limit hint it sent.
   */
  listTags(name: string): Promise<TagListing> {
    return this.observed("list-tags", async () => {
      const what = `GET tags ${name}`;
      this.checkName(name);
      const tags: string[] = [];
      const seen = new Set<string>();
      let url: URL | null = apiUrl(this.url, name, "tags", "list");
      url.searchParams.set("n", String(TAG_PAGE_SIZE));
      let rateLimit: TagListing["rateLimit"] = null;
      for (let page = 0; url !== null; page++) {
        if (page === MAX_TAG_PAGES) {
          throw this.t.error("invalid", `${what}: more than ${MAX_TAG_PAGES} pages`);
        }
        if (seen.has(url.href)) throw this.t.error("invalid", `${what}: pagination loops`);
        seen.add(url.href);
        const ex = await this.request("GET", url, { accept: "application/json" }, name, what);
        rateLimit = parseRateLimit(ex.response.headers) ?? rateLimit;
        const bytes = await readBounded(this.t, ex, TAG_PAGE_MAX_BYTES, what);
        tags.push(...tagsPage(this.t, bytes, what, page));
        url = nextPage(this.t, ex, this.origin, what);
      }
      return { tags, rateLimit };
    });
  }

  private async fetchManifest(
    name: string,
    reference: string,
    accept: string | null | undefined,
    maxBytes: number,
  ): Promise<FetchedManifest> {
    const what = `GET manifest ${name}:${reference}`;
    this.checkReference(name, reference);
    const ex = await this.manifestRequest("GET", name, reference, accept, what);
    // The body first: every later check may throw, and the connection must be released.
    const bytes = await readBounded(this.t, ex, maxBytes, what);
    const announced = this.announcedDigest(ex.response, what);
    const mediaType = contentType(ex.response) ?? bodyMediaType(bytes);
    if (mediaType === null) {
      throw this.t.error("invalid", `${what}: neither Content-Type nor a mediaType in the body`);
    }
    // The digest is the manifest's identity: bytes that do not hash to it never leave here.
    const v = manifestDigest(bytes, reference, announced);
    if ("expected" in v) {
      throw this.t.error(
        "digest-mismatch",
        `${what}: digest mismatch: ${v.expected} expected, bytes hash to ${v.actual}`,
      );
    }
    return { bytes, mediaType, digest: v.digest };
  }

  private manifestRequest(
    method: "GET" | "HEAD",
    name: string,
    reference: string,
    accept: string | null | undefined,
    what: string,
  ): Promise<Exchange> {
    const url = apiUrl(this.url, name, "manifests", reference);
    return this.request(method, url, { accept: forwardAccept(accept) }, name, what);
  }

  /** A request with the auth dance: one retry after a 401, a second 401 is final. */
  private async request(
    method: "GET" | "HEAD",
    url: URL,
    headers: Record<string, string>,
    name: string,
    what: string,
  ): Promise<Exchange> {
    const scope = pullScope(name);
    const send = (authorization: string | null) =>
      this.t.send({ method, url, headers, authorization, authOrigin: this.origin, what });
    let authorization = await this.auth.preemptive(scope);
    let ex = await send(authorization);
    // A 401 from a CDN we were redirected to is not our upstream asking for credentials.
    if (ex.response.status === 401 && ex.url.origin === this.origin) {
      const challenge = ex.response.headers.get("www-authenticate");
      await ex.discard();
      authorization = await this.auth.answer(challenge, scope, authorization, what);
      ex = await send(authorization);
      if (ex.response.status === 401) {
        await ex.discard();
        throw this.t.error("denied", `${what}: still 401 after authenticating`, { status: 401 });
      }
    }
    if (ex.response.status >= 200 && ex.response.status < 300) return ex;
    await ex.discard();
    throw this.t.statusError(what, ex.response);
  }

  private announcedDigest(res: Response, what: string): string | null {
    const v = res.headers.get("docker-content-digest");
    if (v === null) return null;
    if (!parseDigest(v.trim())) {
      throw this.t.error("invalid", `${what}: malformed Docker-Content-Digest`);
    }
    return v.trim();
  }

  /** A HEAD by digest whose Docker-Content-Digest (same algorithm) names other content. */
  private checkAnnounced(what: string, digest: string, announced: string | null): void {
    if (announced !== null && namesOtherContent(digest, announced)) {
      throw this.t.error(
        "digest-mismatch",
        `${what}: digest mismatch: upstream names it ${announced}`,
      );
    }
  }

  /** The reference as a digest, null for a tag; invalid input is refused before any request. */
  private checkReference(name: string, reference: string) {
    this.checkName(name);
    const d = parseDigest(reference);
    if (!d && !isValidTag(reference)) {
      throw this.t.error("invalid", `not a tag or digest: ${JSON.stringify(reference)}`);
    }
    return d;
  }

  private checkDigest(name: string, digest: string): void {
    this.checkName(name);
    if (!parseDigest(digest)) {
      throw this.t.error("invalid", `not a digest: ${JSON.stringify(digest)}`);
    }
  }

  private checkName(name: string): void {
    if (!isValidName(name)) {
      throw this.t.error("invalid", `not a repository name: ${JSON.stringify(name)}`);
    }
  }

  private async observed<T>(op: UpstreamOp, fn: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      const out = await fn();
      this.emit(op, null, started);
      return out;
    } catch (e) {
      // Callers switch on UpstreamError alone; anything else here is a bug, reported as one.
      const err = isUpstreamError(e)
        ? e
        : this.t.error("invalid", `internal error: ${e instanceof Error ? e.message : e}`, {
          cause: e,
        });
      this.emit(op, err, started);
      throw err;
    }
  }

  private emit(op: UpstreamOp, err: UpstreamError | null, started: number): void {
    if (!this.observeFn) return;
    try {
      this.observeFn(this.url, op, err ? err.kind : "ok", (performance.now() - started) / 1000);
    } catch {
      // An observer's failure is not the upstream's.
    }
  }
}

function contentType(res: Response): string | null {
  const v = res.headers.get("content-type");
  const bare = v === null ? "" : bareMediaType(v);
  return bare === "" ? null : bare;
}

function bodyMediaType(bytes: Uint8Array): string | null {
  try {
    const doc = JSON.parse(new TextDecoder().decode(bytes));
    return typeof doc?.mediaType === "string" ? doc.mediaType : null;
  } catch {
    return null;
  }
}
