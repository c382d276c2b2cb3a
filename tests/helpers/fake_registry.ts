// A small OCI registry to stand upstream of Wharf in tests, honest by default and hostile on
// demand. It is a real HTTP server (Deno.serve on 127.0.0.1), reachable under two host names
// that are two "registrable domains" for credential scoping: `127.0.0.1` (an IP) and
// `localhost` (a single label). Everything is configured per test:
//
//   const reg = await FakeRegistry.start({ auth: { scheme: "bearer", realmHost: "localhost" } });
//   const digest = reg.addManifest("library/alpine", manifestJson, { tags: ["3"] });
//   reg.fault({ path: /\/blobs\// , times: 1 }, { status: 503, headers: { "retry-after": "7" } });
//   ... drive a client against reg.url ...
//   assert.equal(reg.count("GET", /\/manifests\//), 1);
//   await reg.close();
//
// Served paths:
//   GET  /v2/                                  ping (auth-checked)
//   HEAD/GET /v2/<name>/manifests/<tag|digest> (auth-checked)
//   HEAD/GET /v2/<name>/blobs/<digest>         (auth-checked; `blobRedirect` applies to GET)
//   GET  /v2/<name>/referrers/<digest>         computed from the stored manifests' `subject`
//   GET  /token?service=&scope=                the Bearer token service
//   HEAD/GET /cdn/<digest>                     unauthenticated blob bytes (other-origin target)
//   HEAD/GET /mirror/<name>/blobs/<digest>     auth-checked blob bytes (same-origin target)
//   GET  /hop/<n>/<name>/blobs/<digest>        a redirect chain, n redirects left
//   GET  /loop/a, /loop/b                      redirect to each other
import { createHash } from "node:crypto";
import { UPSTREAM_DEFAULTS, type UpstreamConfig } from "../../lib/config/mod.ts";
import { resolveRange } from "../../lib/oci/mod.ts";

export type FakeHost = "127.0.0.1" | "localhost";

/** Blob bytes produced on demand (so a 64 MiB blob costs no 64 MiB buffer). */
export interface BlobSource {
  size: number;
  /** bytes [start, end) */
  read(start: number, end: number): ReadableStream<Uint8Array>;
}

export interface BasicAuth {
  scheme: "basic";
  username: string;
  password: string;
}

export interface BearerAuth {
  scheme: "bearer";
  /** the host name in the challenge's realm URL (this server's /token); default: `host` */
  realmHost?: FakeHost;
  /** when set, the token service checks credentials that are sent (wrong ones: 401) */
  username?: string;
  password?: string;
  /** whether a token issued without credentials may pull (default true) */
  anonymous?: boolean;
  /** `expires_in` of issued tokens (default 300); null leaves the field out */
  expiresIn?: number | null;
  /** the JSON field carrying the token (default `token`) */
  tokenField?: "token" | "access_token";
  /** `json` (default), an HTML page with 200, or JSON without any token */
  tokenBody?: "json" | "html" | "no-token";
  /** the challenge's `service` (default `fake-registry`) */
  service?: string;
}

export interface FakeRegistryOptions {
  /** the host name in `url` (the server always listens on 127.0.0.1) */
  host?: FakeHost;
  auth?: BasicAuth | BearerAuth | null;
  /** sent verbatim as WWW-Authenticate on every 401 instead of the real challenge */
  challengeOverride?: string;
  /** honour Range on blob GETs (default true); false answers 200 with the whole blob */
  rangeSupport?: boolean;
  /** serve the referrers API (default true); false answers 404 like an older registry */
  referrersApi?: boolean;
  /** apply `artifactType` on the referrers API (default true) */
  referrersFilter?: boolean;
  /** page the referrers API with `Link` headers this many per page (default: one page) */
  referrersPageSize?: number;
  /**
   * Blob GETs answer a redirect: to /mirror on the same origin, to /cdn on the other host
   * name (another origin, where an Authorization header must not follow), into a loop, or
   * through a chain of n redirects ending at /mirror.
   */
  blobRedirect?: "none" | "same-origin" | "other-origin" | "loop" | number;
  /** Docker-Content-Digest of manifest answers (default `correct`) */
  manifestDigestHeader?: "correct" | "omit" | "wrong" | "sha512" | "malformed";
  /** Content-Type of manifest answers: the stored type (default) or none */
  manifestContentType?: "stored" | "omit";
  /** PEM cert and key: serve HTTPS */
  tls?: { cert: string; key: string };
}

export type Fault =
  /** answer this status (and headers, body) instead */
  | { status: number; headers?: Record<string, string>; body?: string }
  /** the honest Content-Length, then only this many bytes, then the connection closes */
  | { truncateAfter: number }
  /** the honest bytes under this Content-Length (a larger one truncates, a smaller one cuts) */
  | { contentLength: number }
  /** this many bytes, then silence until the client gives up or the registry closes */
  | { stallAfter: number }
  /** the body in `chunkBytes` pieces (default 1024), each `delayMs` after the previous */
  | { trickleMs: number; chunkBytes?: number }
  /** response headers only after this long (then the normal answer) */
  | { delayMs: number }
  /** other bytes than stored (honest Content-Length of them), the same other headers */
  | { replaceBody: Uint8Array | string }
  /** the honest bytes without Content-Length (chunked) */
  | { omitLength: true };

export interface FaultMatch {
  method?: string;
  /** substring or pattern of the path (without the query) */
  path: string | RegExp;
  /** how many matching requests it affects (default: all) */
  times?: number;
}

export interface SeenRequest {
  method: string;
  /** the Host header: tells `127.0.0.1:port` from `localhost:port` */
  host: string;
  path: string;
  query: URLSearchParams;
  authorization: string | null;
  accept: string | null;
  range: string | null;
}

interface StoredManifest {
  body: Uint8Array;
  mediaType: string;
  digest: string;
}

interface IssuedToken {
  scope: string;
  expiresAt: number;
  authenticated: boolean;
}

const enc = new TextEncoder();
const CHUNK = 64 * 1024;

export function sha256Of(data: Uint8Array): string {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

export function sha512Of(data: Uint8Array): string {
  return `sha512:${createHash("sha512").update(data).digest("hex")}`;
}

function chunked(bytes: Uint8Array, chunk = CHUNK): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.subarray(at, Math.min(bytes.length, at + chunk)));
      at += chunk;
    },
  });
}

/**
 * An UpstreamConfig for `url`: no credentials, the configured defaults otherwise; timeouts
 * may be fractional seconds in tests.
 */
export function upstreamConfig(
  url: string,
  overrides: Partial<UpstreamConfig> = {},
): UpstreamConfig {
  return {
    url,
    username: null,
    password: null,
    caBundle: null,
    ...UPSTREAM_DEFAULTS,
    ...overrides,
  };
}

/** `http://127.0.0.1:<port>` where nothing listens: connections are refused. */
export function refusingUrl(): string {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return `http://127.0.0.1:${port}`;
}

/** `n` random bytes (getRandomValues fills at most 64 KiB a call). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let at = 0; at < n; at += 65536) crypto.getRandomValues(out.subarray(at, at + 65536));
  return out;
}

export function bytesSource(bytes: Uint8Array): BlobSource {
  return { size: bytes.length, read: (s, e) => chunked(bytes.subarray(s, e)) };
}

/**
 * `size` pseudo-random bytes generated while they are read: one random 1 MiB block repeated.
 * The digest is computed by streaming once, never holding more than the block.
 */
export function generatedBlob(size: number): { source: BlobSource; digest: string } {
  const block = randomBytes(1024 * 1024);
  const h = createHash("sha256");
  for (let at = 0; at < size; at += block.length) {
    h.update(block.subarray(0, Math.min(block.length, size - at)));
  }
  const source: BlobSource = {
    size,
    read(start, end) {
      let at = start;
      return new ReadableStream({
        pull(c) {
          if (at >= end) return c.close();
          const off = at % block.length;
          const n = Math.min(CHUNK, block.length - off, end - at);
          c.enqueue(block.subarray(off, off + n));
          at += n;
        },
      }, { highWaterMark: 0 });
    },
  };
  return { source, digest: `sha256:${h.digest("hex")}` };
}

async function collect(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

export class FakeRegistry {
  /** mutable: a test may change any option between requests */
  options: FakeRegistryOptions;
  readonly requests: SeenRequest[] = [];
  readonly port: number;
  private readonly server: Deno.HttpServer<Deno.NetAddr>;
  private readonly blobs = new Map<string, Map<string, BlobSource>>();
  private readonly manifests = new Map<string, Map<string, StoredManifest>>();
  private readonly tags = new Map<string, Map<string, string>>();
  private readonly tokens = new Map<string, IssuedToken>();
  private readonly faults: { match: FaultMatch; fault: Fault; left: number }[] = [];
  private readonly closing: Promise<void>;
  private signalClosing!: () => void;

  private constructor(options: FakeRegistryOptions) {
    this.options = options;
    this.closing = new Promise((r) => (this.signalClosing = r));
    this.server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      onListen() {},
      ...(options.tls ?? {}),
    }, (req) => this.handle(req));
    this.port = this.server.addr.port;
  }

  static start(options: FakeRegistryOptions = {}): Promise<FakeRegistry> {
    return Promise.resolve(new FakeRegistry(options));
  }

  /** `http(s)://<host>:<port>` with the configured host name */
  get url(): string {
    return this.urlFor(this.options.host ?? "127.0.0.1");
  }

  urlFor(host: FakeHost): string {
    return `${this.options.tls ? "https" : "http"}://${host}:${this.port}`;
  }

  /** The other host name than `url`'s: another origin on the same server. */
  get otherHost(): FakeHost {
    return (this.options.host ?? "127.0.0.1") === "127.0.0.1" ? "localhost" : "127.0.0.1";
  }

  /** An UpstreamConfig for this registry's `url` (see upstreamConfig). */
  upstreamConfig(overrides: Partial<UpstreamConfig> = {}): UpstreamConfig {
    return upstreamConfig(this.url, overrides);
  }

  async close(): Promise<void> {
    this.signalClosing();
    await this.server.shutdown();
  }

  // ---- content -----------------------------------------------------------------------------

  /** Stores a blob under `name`; `digest` (default: its sha256) may lie on purpose. */
  addBlob(name: string, content: Uint8Array | BlobSource, digest?: string): string {
    const source = content instanceof Uint8Array ? bytesSource(content) : content;
    const d = digest ?? (content instanceof Uint8Array ? sha256Of(content) : null);
    if (d === null) throw new Error("addBlob: a BlobSource needs its digest");
    this.mapOf(this.blobs, name).set(d, source);
    return d;
  }

  /**
   * Stores a manifest (bytes, or an object serialised as JSON) under `name`, tagged with
   * `tags`; `mediaType` defaults to the body's. `digest` (default: its sha256) may lie.
   */
  addManifest(
    name: string,
    body: Uint8Array | Record<string, unknown>,
    opts: { tags?: string[]; mediaType?: string; digest?: string } = {},
  ): string {
    const bytes = body instanceof Uint8Array ? body : enc.encode(JSON.stringify(body));
    const doc = body instanceof Uint8Array ? JSON.parse(new TextDecoder().decode(body)) : body;
    const mediaType = opts.mediaType ?? doc.mediaType;
    const digest = opts.digest ?? sha256Of(bytes);
    this.mapOf(this.manifests, name).set(digest, { body: bytes, mediaType, digest });
    for (const t of opts.tags ?? []) this.mapOf(this.tags, name).set(t, digest);
    return digest;
  }

  /** Points `tag` of `name` at `digest`. */
  tag(name: string, tag: string, digest: string): void {
    this.mapOf(this.tags, name).set(tag, digest);
  }

  // ---- hostility ---------------------------------------------------------------------------

  /** Applies `fault` to matching requests (the first active match wins). */
  fault(match: FaultMatch, fault: Fault): void {
    this.faults.push({ match, fault, left: match.times ?? Infinity });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  // ---- observation -------------------------------------------------------------------------

  /** Requests seen with `method` (null: any) whose path contains or matches `path`. */
  count(method: string | null, path: string | RegExp): number {
    return this.seen(method, path).length;
  }

  seen(method: string | null, path: string | RegExp): SeenRequest[] {
    return this.requests.filter((r) =>
      (method === null || r.method === method) &&
      (typeof path === "string" ? r.path.includes(path) : path.test(r.path))
    );
  }

  tokenRequests(): SeenRequest[] {
    return this.seen("GET", "/token");
  }

  resetLog(): void {
    this.requests.length = 0;
  }

  /** Forgets every issued token: a client holding one gets 401 and must fetch another. */
  revokeTokens(): void {
    this.tokens.clear();
  }

  // ---- serving -----------------------------------------------------------------------------

  private mapOf<V>(m: Map<string, Map<string, V>>, name: string): Map<string, V> {
    let inner = m.get(name);
    if (!inner) m.set(name, inner = new Map());
    return inner;
  }

  private async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    this.requests.push({
      method: req.method,
      host: req.headers.get("host") ?? "",
      path: url.pathname,
      query: url.searchParams,
      authorization: req.headers.get("authorization"),
      accept: req.headers.get("accept"),
      range: req.headers.get("range"),
    });
    const fault = this.takeFault(req.method, url.pathname);
    if (fault && "delayMs" in fault) await this.sleep(fault.delayMs);
    if (fault && "status" in fault) {
      return new Response(req.method === "HEAD" ? null : fault.body ?? null, {
        status: fault.status,
        headers: fault.headers,
      });
    }
    const res = await this.route(req, url);
    return fault ? this.distort(res, fault, req.method) : res;
  }

  private takeFault(method: string, path: string): Fault | null {
    for (const f of this.faults) {
      const m = f.match;
      if (f.left <= 0 || (m.method && m.method !== method)) continue;
      if (typeof m.path === "string" ? !path.includes(m.path) : !m.path.test(path)) continue;
      f.left--;
      return f.fault;
    }
    return null;
  }

  private async distort(res: Response, fault: Fault, method: string): Promise<Response> {
    if (method === "HEAD" || !res.body) return res;
    const headers = new Headers(res.headers);
    const init = { status: res.status, headers };
    if ("replaceBody" in fault) {
      await res.body.cancel();
      const b = typeof fault.replaceBody === "string"
        ? enc.encode(fault.replaceBody)
        : fault.replaceBody;
      headers.set("content-length", String(b.length));
      return new Response(b as BodyInit, init);
    }
    const bytes = await collect(res.body);
    if ("omitLength" in fault) {
      headers.delete("content-length");
      return new Response(chunked(bytes), init);
    }
    if ("contentLength" in fault) {
      headers.set("content-length", String(fault.contentLength));
      return new Response(chunked(bytes), init);
    }
    headers.set("content-length", String(bytes.length));
    if ("truncateAfter" in fault) {
      return new Response(chunked(bytes.subarray(0, fault.truncateAfter)), init);
    }
    if ("stallAfter" in fault) return new Response(this.stalled(bytes, fault.stallAfter), init);
    if ("trickleMs" in fault) {
      return new Response(this.trickle(bytes, fault.trickleMs, fault.chunkBytes ?? 1024), init);
    }
    return new Response(bytes as BodyInit, init);
  }

  private stalled(bytes: Uint8Array, after: number): ReadableStream<Uint8Array> {
    let sent = false;
    let release = () => {};
    const released = new Promise<void>((r) => (release = r));
    return new ReadableStream({
      pull: async (c) => {
        if (!sent) {
          sent = true;
          if (after > 0) c.enqueue(bytes.subarray(0, after));
          return;
        }
        await Promise.race([released, this.closing]);
        c.close(); // short of Content-Length: the server drops the connection
      },
      cancel: () => release(),
    });
  }

  private trickle(bytes: Uint8Array, ms: number, size: number): ReadableStream<Uint8Array> {
    let at = 0;
    return new ReadableStream({
      pull: async (c) => {
        if (at >= bytes.length) return c.close();
        if (at > 0) await this.sleep(ms);
        c.enqueue(bytes.subarray(at, at + size));
        at += size;
      },
    });
  }

  /** Waits `ms`, or less when the registry closes (no timer outlives a test). */
  private async sleep(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([new Promise((r) => (timer = setTimeout(r, ms))), this.closing]);
    clearTimeout(timer);
  }

  private route(req: Request, url: URL): Promise<Response> | Response {
    const p = url.pathname;
    if (p === "/token") return this.token(req, url);
    if (p === "/v2/" || p === "/v2") return this.guard(req, null, () => json({}));
    let m = /^\/cdn\/([^/]+)$/.exec(p);
    if (m) return this.blobBytes(req, this.findBlob(m[1]), m[1]);
    m = /^\/loop\/([ab])$/.exec(p);
    if (m) return redirect(`/loop/${m[1] === "a" ? "b" : "a"}`);
    m = /^\/hop\/(\d+)\/(.+)\/blobs\/([^/]+)$/.exec(p);
    if (m) {
      const left = Number(m[1]);
      return redirect(
        left > 1 ? `/hop/${left - 1}/${m[2]}/blobs/${m[3]}` : `/mirror/${m[2]}/blobs/${m[3]}`,
      );
    }
    m = /^\/mirror\/(.+)\/blobs\/([^/]+)$/.exec(p);
    if (m) {
      const [, name, digest] = m;
      return this.guard(req, name, () => this.blobBytes(req, this.blob(name, digest), digest));
    }
    m = /^\/v2\/(.+)\/(manifests|blobs|referrers)\/([^/]+)$/.exec(p);
    if (!m) return ociError(404, "NAME_UNKNOWN", "no such path");
    const [, name, kind, ref] = m;
    return this.guard(req, name, () => {
      if (kind === "manifests") return this.manifest(req, name, ref);
      if (kind === "referrers") return this.referrers(url, name, ref);
      return this.blobGet(req, name, ref);
    });
  }

  private blob(name: string, digest: string): BlobSource | undefined {
    return this.blobs.get(name)?.get(digest);
  }

  private findBlob(digest: string): BlobSource | undefined {
    for (const m of this.blobs.values()) if (m.has(digest)) return m.get(digest);
    return undefined;
  }

  private blobGet(req: Request, name: string, digest: string): Response {
    const src = this.blob(name, digest);
    if (!src) return ociError(404, "BLOB_UNKNOWN", digest);
    const r = this.options.blobRedirect ?? "none";
    if (req.method === "GET" && r !== "none") {
      if (r === "same-origin") return redirect(`/mirror/${name}/blobs/${digest}`);
      if (r === "other-origin") {
        // a presigned-looking query, which must never appear in an error message
        return redirect(`${this.urlFor(this.otherHost)}/cdn/${digest}?X-Signature=s3cr3t`);
      }
      if (r === "loop") return redirect("/loop/a");
      return redirect(
        r > 1 ? `/hop/${r - 1}/${name}/blobs/${digest}` : `/mirror/${name}/blobs/${digest}`,
      );
    }
    return this.blobBytes(req, src, digest);
  }

  private blobBytes(req: Request, src: BlobSource | undefined, digest: string): Response {
    if (!src) return ociError(404, "BLOB_UNKNOWN", digest);
    const headers = new Headers({
      "content-type": "application/octet-stream",
      "docker-content-digest": digest,
      "accept-ranges": "bytes",
    });
    const range = this.options.rangeSupport === false
      ? { kind: "full" as const }
      : resolveRange(req.headers.get("range"), src.size);
    if (range.kind === "unsatisfiable") {
      headers.set("content-range", `bytes */${src.size}`);
      return new Response(null, { status: 416, headers });
    }
    const [start, end, status] = range.kind === "partial"
      ? [range.start, range.end + 1, 206]
      : [0, src.size, 200];
    if (status === 206) headers.set("content-range", `bytes ${start}-${end - 1}/${src.size}`);
    headers.set("content-length", String(end - start));
    const body = req.method === "HEAD" ? null : src.read(start, end);
    return new Response(body, { status, headers });
  }

  private manifest(req: Request, name: string, ref: string): Response {
    const digest = ref.includes(":") ? ref : this.tags.get(name)?.get(ref);
    const m = digest === undefined ? undefined : this.manifests.get(name)?.get(digest);
    if (!m) return ociError(404, "MANIFEST_UNKNOWN", ref);
    const headers = new Headers({ "content-length": String(m.body.length) });
    if (this.options.manifestContentType !== "omit") {
      headers.set("content-type", `${m.mediaType}; charset=utf-8`);
    }
    const mode = this.options.manifestDigestHeader ?? "correct";
    const announced = {
      correct: m.digest,
      omit: null,
      wrong: sha256Of(enc.encode("something else")),
      sha512: sha512Of(m.body),
      malformed: "sha256:not-hex",
    }[mode];
    if (announced !== null) headers.set("docker-content-digest", announced);
    return new Response(req.method === "HEAD" ? null : m.body as BodyInit, { headers });
  }

  private referrers(url: URL, name: string, digest: string): Response {
    if (this.options.referrersApi === false) return ociError(404, "NAME_UNKNOWN", "no API");
    const artifactType = url.searchParams.get("artifactType");
    const filter = artifactType !== null && this.options.referrersFilter !== false;
    const all = [...(this.manifests.get(name)?.values() ?? [])].flatMap((m) => {
      const doc = JSON.parse(new TextDecoder().decode(m.body));
      if (doc.subject?.digest !== digest) return [];
      const type = doc.artifactType ?? doc.config?.mediaType;
      if (filter && type !== artifactType) return [];
      return [{
        mediaType: m.mediaType,
        digest: m.digest,
        size: m.body.length,
        ...(type ? { artifactType: type } : {}),
        ...(doc.annotations ? { annotations: doc.annotations } : {}),
      }];
    });
    const size = this.options.referrersPageSize ?? Infinity;
    const from = Number(url.searchParams.get("last") ?? 0);
    const page = all.slice(from, from + size);
    const headers = new Headers({ "content-type": "application/vnd.oci.image.index.v1+json" });
    if (filter) headers.set("oci-filters-applied", "artifactType");
    if (from + size < all.length) {
      const next = new URLSearchParams(url.searchParams);
      next.set("last", String(from + size));
      headers.set("link", `<${url.pathname}?${next}>; rel="next"`);
    }
    const index = {
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: page,
    };
    return new Response(JSON.stringify(index), { headers });
  }

  // ---- auth --------------------------------------------------------------------------------

  private guard(req: Request, name: string | null, serve: () => Response): Response {
    const auth = this.options.auth;
    if (!auth) return serve();
    const given = req.headers.get("authorization");
    if (auth.scheme === "basic") {
      if (given === basic(auth.username, auth.password)) return serve();
      return this.unauthorized('Basic realm="fake-registry"');
    }
    const t = given?.startsWith("Bearer ") ? this.tokens.get(given.slice(7)) : undefined;
    const scope = name === null ? null : `repository:${name}:pull`;
    const ok = t !== undefined && Date.now() < t.expiresAt &&
      (scope === null || t.scope.split(" ").includes(scope)) &&
      (t.authenticated || auth.anonymous !== false);
    if (ok) return serve();
    const realm = `${this.urlFor(auth.realmHost ?? this.options.host ?? "127.0.0.1")}/token`;
    const service = auth.service ?? "fake-registry";
    return this.unauthorized(
      `Bearer realm="${realm}",service="${service}"${scope ? `,scope="${scope}"` : ""}`,
    );
  }

  private unauthorized(challenge: string): Response {
    const res = ociError(401, "UNAUTHORIZED", "authentication required");
    res.headers.set("www-authenticate", this.options.challengeOverride ?? challenge);
    return res;
  }

  private token(req: Request, url: URL): Response {
    const auth = this.options.auth;
    if (auth?.scheme !== "bearer") return ociError(404, "UNSUPPORTED", "no token service");
    const given = req.headers.get("authorization");
    let authenticated = false;
    if (given !== null && auth.username !== undefined) {
      if (given !== basic(auth.username, auth.password ?? "")) {
        return ociError(401, "UNAUTHORIZED", "bad credentials");
      }
      authenticated = true;
    }
    if (auth.tokenBody === "html") {
      return new Response("<html><body>Sign in</body></html>", {
        headers: { "content-type": "text/html" },
      });
    }
    const token = crypto.randomUUID();
    const expiresIn = auth.expiresIn === undefined ? 300 : auth.expiresIn;
    this.tokens.set(token, {
      scope: url.searchParams.getAll("scope").join(" "),
      expiresAt: Date.now() + (expiresIn ?? 60) * 1000,
      authenticated,
    });
    const body: Record<string, unknown> = auth.tokenBody === "no-token"
      ? { detail: "no token for you" }
      : { [auth.tokenField ?? "token"]: token };
    if (expiresIn !== null) body.expires_in = expiresIn;
    return json(body);
  }
}

/** RFC 7617 with UTF-8 credentials */
export function basic(username: string, password: string): string {
  const bytes = enc.encode(`${username}:${password}`);
  return `Basic ${btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""))}`;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function ociError(status: number, code: string, detail: string): Response {
  return json({ errors: [{ code, message: code.toLowerCase(), detail }] }, status);
}

function redirect(location: string): Response {
  return new Response(null, { status: 307, headers: { location } });
}
