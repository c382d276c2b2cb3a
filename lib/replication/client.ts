// One downstream registry as replication writes to it: blob HEAD, cross-repository mount,
// streamed upload, manifest HEAD/PUT/DELETE with X-Svc-Source-Timestamp, and tag listing for
// reconcile. The HTTP layer (timeouts, redirects, the auth dance, errors) is lib/upstream's;
// every failure leaves as an UpstreamError labelled `downstream <name>`.
import type { DownstreamConfig } from "../config/mod.ts";
import { nextLinkTarget, parseDigest } from "../oci/mod.ts";
import {
  Authenticator,
  type Exchange,
  readBounded,
  TokenCache,
  Transport,
  type UpstreamError,
} from "../upstream/mod.ts";

/**
 * Blobs up to this size go up as one PATCH of a buffer (answerable to a 401 by resending); larger
 * ones as PATCHes of STREAM_PATCH bytes whose bodies stream the stored chunks through.
 */
const SMALL_BLOB = 1024 * 1024;
/**
 * fetch copies a buffer body before sending it, and V8 frees those copies late: replicating
 * 4 × 256 MiB at once with 8 MiB buffer PATCHes peaked at 272 MiB RSS (2 MiB: 179, 1 MiB: 156,
 * 512 KiB: 145–151 at 90 MiB/s). Streamed bodies of 8 MiB with their Content-Length peaked at
 * 137 MiB at 105 MiB/s, and keep 8 MiB per round trip for a distant downstream.
 */
const STREAM_PATCH = 8 * 1024 * 1024;

/** The answer to a write that counts as done without having changed the downstream. */
export type WriteOutcome = "written" | "superseded" | "absent";

/** A delete the downstream refuses as such (not a failure to retry), with its own words. */
export interface Unsupported {
  unsupported: string;
}

const ERROR_BODY_MAX = 16 * 1024;
const TAGS_PAGE_MAX = 4 * 1024 * 1024;

/** What a HEAD of a downstream manifest accepts: every manifest kind replication sends. */
export const MANIFEST_ACCEPT = [
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.docker.distribution.manifest.v2+json",
  "*/*",
].join(", ");

export class DownstreamClient {
  readonly name: string;
  readonly url: string;
  private readonly origin: string;
  /** where an upload Location may point besides `origin` (`upload_hosts`) */
  private readonly uploadOrigins: ReadonlySet<string>;
  private readonly t: Transport;
  private readonly auth: Authenticator;

  constructor(readonly cfg: DownstreamConfig) {
    this.name = cfg.name;
    this.url = cfg.url;
    const base = new URL(cfg.url);
    this.origin = base.origin;
    this.uploadOrigins = new Set(cfg.uploadHosts ?? []);
    let caCerts: string[] | undefined;
    if (cfg.caBundle !== null) caCerts = [Deno.readTextFileSync(cfg.caBundle)];
    this.t = new Transport({
      upstream: cfg.url,
      label: `downstream ${cfg.name} (${cfg.url})`,
      connectTimeoutMs: cfg.connectTimeoutSecs * 1000,
      readTimeoutMs: cfg.readTimeoutSecs * 1000,
      maxRedirects: cfg.maxRedirects,
      caCerts,
      outboundAllow: cfg.outboundAllow,
    });
    const creds = cfg.username !== null && cfg.password !== null
      ? { username: cfg.username, password: cfg.password }
      : null;
    this.auth = new Authenticator(this.t, base, creds, new TokenCache(), () => {});
  }

  close(): void {
    this.t.close();
  }

  private api(name: string, rest: string): URL {
    return new URL(`/v2/${name}/${rest}`, this.origin);
  }

  /**
   * One request with the auth dance. Requests with a streamed body authenticate up front only
   * (a stream cannot be sent twice): the earlier requests of a push have learned the scheme.
   */
  private async request(
    method: "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE",
    url: URL,
    name: string,
    what: string,
    init: { headers?: Record<string, string>; body?: BodyInit | null } = {},
  ): Promise<Exchange> {
    const scope = `repository:${name}:pull,push`;
    const send = (authorization: string | null) =>
      this.t.send({
        method,
        url,
        headers: init.headers,
        body: init.body,
        authorization,
        authOrigin: this.origin,
        what,
      });
    let authorization = await this.auth.preemptive(scope);
    let ex = await send(authorization);
    if (ex.response.status === 401 && !(init.body instanceof ReadableStream)) {
      const challenge = ex.response.headers.get("www-authenticate");
      await ex.discard();
      authorization = await this.auth.answer(challenge, scope, authorization, what);
      ex = await send(authorization);
    }
    return ex;
  }

  /**
   * The error of a non-success answer, carrying the registry's own error text when the
   * downstream's origin answered; another origin's (an upload host, a redirect's target) is
   * named by its status only, so a host the config did not name cannot write into the
   * replication status and the logs.
   */
  private async failure(ex: Exchange, what: string): Promise<UpstreamError> {
    const res = ex.response;
    if (ex.url.origin !== this.origin) {
      await ex.discard();
      // Not even its reason phrase: the status number and Retry-After only.
      const bare = new Response(null, { status: res.status, headers: pick(res, "retry-after") });
      const err = this.t.statusError(what, bare);
      err.message += ` (from ${ex.url.origin})`;
      return err;
    }
    let detail = "";
    try {
      const text = new TextDecoder().decode(await readBounded(this.t, ex, ERROR_BODY_MAX, what));
      detail = errorText(text);
    } catch { /* the status says enough */ }
    const err = this.t.statusError(what, res);
    if (detail) err.message += `: ${detail}`;
    return err;
  }

  /** 409 REPLICATION_SUPERSEDED: the downstream holds a newer write (SPEC Manifests rule 8). */
  private async superseded(ex: Exchange, what: string): Promise<boolean | UpstreamError> {
    const text = new TextDecoder().decode(await readBounded(this.t, ex, ERROR_BODY_MAX, what));
    if (/"code"\s*:\s*"REPLICATION_SUPERSEDED"/.test(text)) return true;
    const err = this.t.error("invalid", `${what}: 409 Conflict: ${errorText(text)}`, {
      status: 409,
      retryable: true,
    });
    return err;
  }

  async hasBlob(name: string, digest: string): Promise<boolean> {
    const what = `HEAD blob ${name}@${digest}`;
    const ex = await this.request("HEAD", this.api(name, `blobs/${digest}`), name, what);
    await ex.discard();
    if (ex.response.status === 200) return true;
    if (ex.response.status === 404) return false;
    throw this.t.statusError(what, ex.response);
  }

  /**
   * Mounts `digest` from `from` when the downstream can; otherwise returns the upload URL the
   * downstream opened instead (a registry without the source answers 202 with an upload).
   */
  async mountOrStart(name: string, digest: string, from: string | null): Promise<URL | "mounted"> {
    const q = from === null
      ? ""
      : `?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(from)}`;
    const what = from === null ? `POST upload ${name}` : `POST mount ${name}@${digest}`;
    const ex = await this.request("POST", this.api(name, `blobs/uploads/${q}`), name, what);
    if (ex.response.status === 201 && from !== null) {
      await ex.discard();
      return "mounted";
    }
    if (ex.response.status !== 202) throw await this.failure(ex, what);
    await ex.discard();
    return this.location(ex, what);
  }

  /**
   * Where the upload goes next. Wharf's PATCHes and PUT carry the blob there, so a Location on
   * another origin is followed only when `upload_hosts` lists it (a registry whose data plane is
   * another host); otherwise the job fails at once naming the host, and nothing is sent to it.
   */
  private location(ex: Exchange, what: string): URL {
    const loc = ex.response.headers.get("location");
    if (!loc) throw this.t.error("invalid", `${what}: answer without Location`);
    let u: URL;
    try {
      u = new URL(loc, ex.url);
      if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(u.protocol);
    } catch {
      throw this.t.error("invalid", `${what}: unusable Location ${loc.slice(0, 200)}`);
    }
    if (u.origin !== this.origin && !this.uploadOrigins.has(u.origin)) {
      // Permanent (kind denied): the same answer gets the same refusal until the config changes.
      throw this.t.error(
        "denied",
        `${what}: upload Location on ${u.origin} refused: not the downstream's origin ` +
          `${this.origin} nor in its upload_hosts (add "${u.origin}" to upload_hosts of ` +
          `downstream "${this.name}" if the downstream stores uploads there)`,
      );
    }
    return u;
  }

  /**
   * Sends the blob as PATCHes, each with its Content-Range and Content-Length (the OCI chunked
   * upload), then completes it with its digest. A large blob's PATCHes stream the stored chunks
   * through, STREAM_PATCH bytes each, so memory stays at a chunk or two whatever its size. One
   * streamed PATCH for the whole blob, without a length, was the first design: Deno's fetch sent
   * it to a Deno server at ~8.5 MB/s here (256 MiB in 29-33 s against 1.7 s into
   * docker-registry); sized parts take the receiver's fast path.
   */
  async upload(
    name: string,
    location: URL,
    digest: string,
    /** the blob's size as recorded */
    size: number,
    body: ReadableStream<Uint8Array>,
  ): Promise<void> {
    const reader = body.getReader();
    let offset = 0;
    let rest: Uint8Array | null = null;
    let what = `PATCH upload ${name}@${digest}`;
    const short = () => new Error(`${digest}: the stored blob is shorter than its record`);
    const patch = async (len: number, part: BodyInit) => {
      const ex = await this.request("PATCH", location, name, what, {
        headers: {
          "content-type": "application/octet-stream",
          "content-range": `${offset}-${offset + len - 1}`,
          "content-length": String(len),
        },
        body: part,
      });
      if (ex.response.status !== 202 && ex.response.status !== 204) {
        throw await this.failure(ex, what);
      }
      await ex.discard();
      location = this.location(ex, what);
      offset += len;
    };
    if (size > 0 && size <= SMALL_BLOB) {
      const buf = new Uint8Array(size);
      let fill = 0;
      try {
        while (fill < size) {
          const r = await reader.read();
          if (r.done) throw short();
          const n = Math.min(r.value.length, size - fill);
          buf.set(r.value.subarray(0, n), fill);
          fill += n;
        }
      } finally {
        await reader.cancel().catch(() => {});
      }
      await patch(size, buf);
    } else {
      try {
        while (offset < size) {
          const len = Math.min(STREAM_PATCH, size - offset);
          let sent = 0;
          const part = new ReadableStream<Uint8Array>({
            pull: async (ctl) => {
              if (sent >= len) return ctl.close();
              if (!rest) {
                const r = await reader.read();
                if (r.done) return ctl.error(short());
                rest = r.value;
              }
              const n = Math.min(rest.length, len - sent);
              ctl.enqueue(n === rest.length ? rest : rest.subarray(0, n));
              rest = n < rest.length ? rest.subarray(n) : null;
              sent += n;
            },
          }, { highWaterMark: 0 });
          await patch(len, part);
        }
      } finally {
        await reader.cancel().catch(() => {});
      }
    }
    location.searchParams.set("digest", digest);
    what = `PUT upload ${name}@${digest}`;
    const put = await this.request("PUT", location, name, what, {
      headers: { "content-length": "0" },
    });
    if (put.response.status !== 201) throw await this.failure(put, what);
    await put.discard();
  }

  /** The downstream's answer to a HEAD of manifest `ref`; null for a 404. */
  private async headManifest(name: string, ref: string, what: string): Promise<Response | null> {
    const ex = await this.request("HEAD", this.api(name, `manifests/${ref}`), name, what, {
      headers: { accept: MANIFEST_ACCEPT },
    });
    await ex.discard();
    if (ex.response.status === 404) return null;
    if (ex.response.status !== 200) throw this.t.statusError(what, ex.response);
    return ex.response;
  }

  /** The digest the downstream holds for `ref`, null when it has none. */
  async manifestDigest(name: string, ref: string): Promise<string | null> {
    const res = await this.headManifest(name, ref, `HEAD manifest ${name}:${ref}`);
    return res?.headers.get("docker-content-digest") ?? null;
  }

  /**
   * The digest `ref` resolves to downstream, null when it has none; a 200 without a usable
   * Docker-Content-Digest is an error (a delete must not guess what it removes).
   */
  async resolve(name: string, ref: string): Promise<string | null> {
    const what = `HEAD manifest ${name}:${ref}`;
    const res = await this.headManifest(name, ref, what);
    if (res === null) return null;
    const digest = res.headers.get("docker-content-digest");
    if (digest === null || !parseDigest(digest)) {
      throw this.t.error(
        "invalid",
        `${what}: answered without a usable Docker-Content-Digest (${
          JSON.stringify((digest ?? "none").slice(0, 100))
        })`,
      );
    }
    return digest;
  }

  async putManifest(
    name: string,
    ref: string,
    bytes: Uint8Array,
    mediaType: string,
    sourceTimestamp: string | null,
  ): Promise<WriteOutcome> {
    const what = `PUT manifest ${name}:${ref}`;
    const headers: Record<string, string> = { "content-type": mediaType };
    if (sourceTimestamp !== null) headers["x-svc-source-timestamp"] = sourceTimestamp;
    const ex = await this.request("PUT", this.api(name, `manifests/${ref}`), name, what, {
      headers,
      body: bytes as BodyInit,
    });
    if (ex.response.status === 201 || ex.response.status === 200) {
      await ex.discard();
      return "written";
    }
    if (ex.response.status === 409) {
      const s = await this.superseded(ex, what);
      if (s === true) return "superseded";
      throw s;
    }
    throw await this.failure(ex, what);
  }

  /**
   * DELETE of a tag or digest. A registry that deletes manifests by digest only answers a tag
   * with 400 DIGEST_INVALID (distribution 2.x) or UNSUPPORTED, and one with deletes disabled
   * 405 UNSUPPORTED: those come back as Unsupported, everything else unexpected throws.
   */
  async deleteManifest(
    name: string,
    ref: string,
    sourceTimestamp: string,
  ): Promise<WriteOutcome | Unsupported> {
    const what = `DELETE manifest ${name}${ref.includes(":") ? "@" : ":"}${ref}`;
    const ex = await this.request("DELETE", this.api(name, `manifests/${ref}`), name, what, {
      headers: { "x-svc-source-timestamp": sourceTimestamp },
    });
    const s = ex.response.status;
    if (s === 202 || s === 200 || s === 204) {
      await ex.discard();
      return "written";
    }
    if (s === 404) {
      await ex.discard();
      return "absent";
    }
    if (s === 409) {
      const r = await this.superseded(ex, what);
      if (r === true) return "superseded";
      throw r;
    }
    const err = await this.failure(ex, what);
    if (s === 405 || (s === 400 && /: (DIGEST_INVALID|UNSUPPORTED)\b/.test(err.message))) {
      return { unsupported: err.message };
    }
    throw err;
  }

  /** Every tag of `name` downstream (paged by Link), [] when the name is unknown there. */
  async tags(name: string): Promise<string[]> {
    const out: string[] = [];
    let url: URL | null = this.api(name, "tags/list?n=1000");
    for (let pages = 0; url && pages < 10_000; pages++) {
      const what = `GET tags ${name}`;
      const ex: Exchange = await this.request("GET", url, name, what);
      if (ex.response.status === 404) {
        await ex.discard();
        return out;
      }
      if (ex.response.status !== 200) throw await this.failure(ex, what);
      const body = await readBounded(this.t, ex, TAGS_PAGE_MAX, what);
      let doc: { tags?: unknown };
      try {
        doc = JSON.parse(new TextDecoder().decode(body));
      } catch {
        throw this.t.error("invalid", `${what}: not JSON`);
      }
      if (Array.isArray(doc.tags)) out.push(...doc.tags.filter((t) => typeof t === "string"));
      url = nextLink(ex.response.headers.get("link"), ex.url, this.origin);
    }
    return out;
  }
}

function pick(res: Response, name: string): Record<string, string> {
  const v = res.headers.get(name);
  return v === null ? {} : { [name]: v };
}

/** The next page, resolved against the answering URL; null unless on the downstream's origin. */
function nextLink(link: string | null, base: URL, origin: string): URL | null {
  const target = nextLinkTarget(link);
  if (!target) return null;
  try {
    const u = new URL(target, base);
    return u.origin === origin ? u : null;
  } catch {
    return null;
  }
}

/** The OCI error body's first code and detail, else the text cut short (an HTML page, say). */
function errorText(text: string): string {
  try {
    const e = JSON.parse(text)?.errors?.[0];
    if (e?.code) {
      const detail = typeof e.detail === "string" ? e.detail : JSON.stringify(e.detail ?? "");
      return `${e.code}${e.message ? ` ${e.message}` : ""}${detail ? ` (${detail})` : ""}`
        .slice(0, 500);
    }
  } catch { /* not JSON */ }
  return text.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim().slice(0, 200);
}
