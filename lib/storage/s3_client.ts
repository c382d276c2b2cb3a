// The few S3 calls the blob store needs, signed with SigV4 by aws4fetch (a maintained, small
// signer; the AWS SDK would add megabytes and buffer bodies it cannot replay). Requests that S3
// answers with 500/503/SlowDown or that fail on the network are retried with backoff while
// their body can be replayed; when the endpoint stays down the caller gets a 503
// PROVIDER_UNAVAILABLE, never a half-written object (S3 writes are all-or-nothing).
import { AwsV4Signer } from "aws4fetch";
import { type RegistryError, unavailable } from "../oci/mod.ts";
import { type FaultReport, RETRY_AFTER_SECS } from "./faults.ts";
import { Presigner } from "./s3_presign.ts";
import { Http1Client, proxyConfigured } from "../http/mod.ts";

/** Bodies from this size go out through Http1Client (no copy); smaller ones through fetch. */
const DIRECT_MIN = 256 * 1024;
/** The longest one upload request may take: a part at well under 100 KB/s. */
const UPLOAD_TIMEOUT_MS = 300_000;
/** S3's answers to a PUT are empty or a short XML error. */
const ANSWER_MAX = 64 * 1024;
/**
 * How long S3 may take to start answering a request that sends no body (a GET's headers, a HEAD,
 * a listing page, a copy): a server that accepts connections and never answers (stopped, not
 * killed) must not hold a client forever. Server-side copies answer when done (s3rver) or stream
 * whitespace until then (AWS): they get UPLOAD_TIMEOUT_MS.
 */
const ANSWER_TIMEOUT_MS = 20_000;

export interface S3Settings {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretKey: string;
  sessionToken?: string;
  /** `https://endpoint/bucket/key` instead of `https://bucket.endpoint/key` */
  pathStyle: boolean;
  /** attempts per request (1 = no retry) */
  attempts?: number;
  /** first backoff; doubles per attempt, with jitter */
  backoffMs?: number;
  /** how long an answer may take to start (default ANSWER_TIMEOUT_MS; tests shorten it) */
  answerTimeoutMs?: number;
}

export interface S3Object {
  key: string;
  size: number;
  /** ms since epoch */
  lastModified: number;
  /** as S3 lists it, quotes removed */
  etag: string;
}

/** An ETag without its quotes (headers and listings differ in how they quote it). */
export function bareEtag(etag: string | null): string {
  return (etag ?? "").replace(/^W\//, "").replace(/^"|"$/g, "");
}

interface RequestInit {
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Uint8Array | null;
  /** statuses returned to the caller instead of thrown (404 is always returned) */
  accept?: number[];
  /** the answer may take this long to start (default ANSWER_TIMEOUT_MS) */
  timeoutMs?: number;
}

/** S3 answered with a status that is not a retryable outage (403, 400, ...). */
export class S3Error extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }

  /**
   * What a client is told (routes/errors.ts): the store refused or garbled an operation (a
   * revoked key, a deleted bucket), which is the provider's trouble, not the request's.
   */
  answer(): RegistryError {
    return unavailable(`${this.message}; retry later`, RETRY_AFTER_SECS.unavailable);
  }
}

export class S3Client {
  private readonly attempts: number;
  private readonly backoffMs: number;
  /**
   * aws4fetch's derived signing keys (one per day and region), kept across signatures: without
   * it every signature derived its key again, 8 of its 11 WebCrypto calls (presigns, which were
   * signed here too, went from ~1.0-1.3 to 0.7-0.9 ms per 307 with the cache; see s3_presign.ts).
   */
  private readonly signingKeys = new Map<string, ArrayBuffer>();
  private readonly presigner: Presigner;
  private readonly http1 = new Http1Client();
  /** how errors and /readyz name the store: `the blob store (S3 http://… bucket b)` */
  readonly label: string;
  /**
   * `report`: told whether each request reached a working S3 (any answer but a 5xx) or met an
   * outage, which is what /readyz says (nothing is cached from a failure: every request opens
   * or reuses a connection afresh, so a restarted S3 serves the next one).
   */
  constructor(readonly s: S3Settings, private readonly report: FaultReport | null = null) {
    this.label = `the blob store (S3 ${s.endpoint} bucket ${s.bucket})`;
    this.presigner = new Presigner({
      accessKeyId: s.accessKeyId,
      secretKey: s.secretKey,
      sessionToken: s.sessionToken,
      region: s.region,
    });
    this.attempts = s.attempts ?? 5;
    this.backoffMs = s.backoffMs ?? 100;
  }

  /** The URL of `key` (unsigned). Keys are encoded per segment so `/` stays a separator. */
  url(key: string, query: Record<string, string> = {}): URL {
    const base = new URL(this.s.endpoint);
    const path = key.split("/").map(encodeRfc3986).join("/");
    let u: URL;
    if (this.s.pathStyle) {
      const prefix = base.pathname.replace(/\/$/, "");
      u = new URL(`${base.origin}${prefix}/${this.s.bucket}${key === "" ? "" : `/${path}`}`);
    } else {
      u = new URL(`${base.protocol}//${this.s.bucket}.${base.host}/${path}`);
    }
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    return u;
  }

  private signer(method: string, url: URL, headers: Headers, signQuery = false) {
    return new AwsV4Signer({
      method,
      url: url.toString(),
      headers,
      accessKeyId: this.s.accessKeyId,
      secretAccessKey: this.s.secretKey,
      sessionToken: this.s.sessionToken,
      service: "s3",
      region: this.s.region,
      signQuery,
      cache: this.signingKeys,
    });
  }

  /** A presigned GET URL valid for `ttlSecs`, with extra response-* overrides. */
  presign(key: string, ttlSecs: number, query: Record<string, string> = {}): Promise<string> {
    const u = this.url(key, { ...query, "X-Amz-Expires": String(ttlSecs) });
    return Promise.resolve(this.presigner.presignGet(u));
  }

  /**
   * Sends one request, retrying outages. The response body is the caller's to consume (or
   * cancel) when the status is 2xx, 404 or listed in `accept`; any other status is thrown.
   */
  async request(method: string, key: string, init: RequestInit = {}): Promise<Response> {
    const url = this.url(key, init.query);
    // How errors name the request: a listing by its prefix, anything else by its key.
    const what = key === "" && init.query?.prefix !== undefined
      ? `LIST ${init.query.prefix}`
      : `${method} ${key}`;
    let lastErr = "";
    let state = "unreachable";
    for (let attempt = 0; attempt < this.attempts; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt));
      const headers = new Headers(init.headers);
      if (init.body) headers.set("content-length", String(init.body.byteLength));
      let res: Response;
      try {
        res = await this.send(method, url, headers, init);
      } catch (e) {
        lastErr = `${what}: ${causeOf(e)}`;
        state = "unreachable";
        if (e instanceof AnswerTimeout) break; // a hung server would hang every retry too
        continue;
      }
      if (res.ok || res.status === 404 || init.accept?.includes(res.status)) {
        this.report?.ok();
        return res;
      }
      const text = await res.text().catch(() => "");
      const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? "";
      if (res.status === 500 || res.status === 503 || code === "SlowDown") {
        lastErr = `${what}: S3 answered ${res.status} ${code}`.trimEnd();
        state = "failing";
        continue;
      }
      this.report?.ok();
      const msg = /<Message>([^<]*)<\/Message>/.exec(text)?.[1] ?? text.slice(0, 200);
      throw new S3Error(
        res.status,
        code,
        `${this.label} refused ${what}: S3 answered ${res.status} ${code} ${msg}`,
      );
    }
    const detail = `${this.label} is ${state}: ${lastErr}`;
    this.report?.fault("unavailable", detail);
    // S3 did not answer, or answered 5xx, through every attempt.
    throw unavailable(`${detail}; retry later`, RETRY_AFTER_SECS.unavailable);
  }

  /** One attempt: signed, sent, answered (headers) within the request's timeout. */
  private async send(
    method: string,
    url: URL,
    headers: Headers,
    init: RequestInit,
  ): Promise<Response> {
    const signed = await this.signer(method, url, headers).sign();
    if (init.body && init.body.byteLength >= DIRECT_MIN && !proxyConfigured()) {
      // A part goes to the socket from its buffer: fetch would copy it first, and those
      // 8 MiB copies, freed late, were most of a pushing server's memory (+150 MiB with 4
      // uploads in flight; see lib/http/http1_client.ts).
      const a = await this.http1.request({
        method,
        url: signed.url,
        headers: signed.headers,
        body: init.body,
        timeoutMs: UPLOAD_TIMEOUT_MS,
        readBody: ANSWER_MAX,
      });
      return new Response(
        a.status === 204 || a.status === 304 ? null : a.body as BodyInit | null,
        { status: a.status, headers: [...a.headers] },
      );
    }
    // Only the wait for the answer's headers is bounded: a body then streams at its reader's pace.
    const ms = init.timeoutMs ?? this.s.answerTimeoutMs ?? ANSWER_TIMEOUT_MS;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new AnswerTimeout(ms)), ms);
    try {
      return await fetch(signed.url, {
        method,
        headers: signed.headers,
        body: init.body as BodyInit | null | undefined,
        signal: ctl.signal,
        // A redirect would carry the blob's bytes (and the signed request) to wherever the
        // endpoint points: an S3 answer is taken as it is, a 3xx as a failure.
        redirect: "manual",
      });
    } catch (e) {
      throw ctl.signal.aborted ? ctl.signal.reason : e;
    } finally {
      clearTimeout(timer);
    }
  }

  private backoff(attempt: number): number {
    const base = this.backoffMs * 2 ** (attempt - 1);
    return Math.min(base, 5000) * (0.5 + Math.random() / 2);
  }

  /** GET, optionally a byte range; NotFound when absent. */
  async get(key: string, range?: { start: number; end: number }): Promise<Response> {
    const res = await this.request("GET", key, {
      headers: range ? { range: `bytes=${range.start}-${range.end}` } : {},
    });
    if (res.status === 404) {
      await res.body?.cancel();
      throw new Deno.errors.NotFound(`s3 object ${key}`);
    }
    return res;
  }

  async head(key: string): Promise<{ size: number; lastModified: number } | null> {
    const res = await this.request("HEAD", key);
    await res.body?.cancel();
    if (res.status === 404) return null;
    return {
      size: Number(res.headers.get("content-length") ?? 0),
      lastModified: Date.parse(res.headers.get("last-modified") ?? "") || 0,
    };
  }

  /** PUT of a whole object; its ETag (unquoted). */
  async put(key: string, body: Uint8Array, headers: Record<string, string> = {}): Promise<string> {
    const res = await this.request("PUT", key, { body, headers });
    await res.body?.cancel();
    if (res.status === 404) {
      throw new S3Error(404, "NoSuchBucket", `${this.label}: PUT ${key}: 404`);
    }
    return bareEtag(res.headers.get("etag"));
  }

  async delete(key: string): Promise<void> {
    const res = await this.request("DELETE", key);
    await res.body?.cancel();
  }

  /** Server-side copy of a whole object (S3 allows up to 5 GiB this way). */
  async copy(src: string, dst: string): Promise<void> {
    const res = await this.request("PUT", dst, {
      headers: { "x-amz-copy-source": this.copySource(src) },
      timeoutMs: UPLOAD_TIMEOUT_MS,
    });
    const text = await res.text();
    if (res.status === 404) throw new Deno.errors.NotFound(`s3 object ${src}`);
    // A copy can fail after its 200 has started: the error is then in the body.
    if (text.includes("<Error>")) {
      throw new S3Error(500, "CopyFailed", `${this.label}: copy ${src}: ${text}`);
    }
  }

  private copySource(key: string): string {
    return `/${this.s.bucket}/${key.split("/").map(encodeRfc3986).join("/")}`;
  }

  /** Every object under `prefix` (ListObjectsV2, paged). */
  async *list(prefix: string): AsyncGenerator<S3Object> {
    let token: string | null = null;
    for (;;) {
      const query: Record<string, string> = { "list-type": "2", prefix, "max-keys": "1000" };
      if (token) query["continuation-token"] = token;
      const res = await this.request("GET", "", { query });
      const xml = await res.text();
      if (res.status === 404) {
        throw new S3Error(404, "NoSuchBucket", `${this.label}: list ${prefix}: ${xml}`);
      }
      for (const m of xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)) {
        const body = m[1];
        yield {
          key: unescapeXml(/<Key>([\s\S]*?)<\/Key>/.exec(body)?.[1] ?? ""),
          size: Number(/<Size>(\d+)<\/Size>/.exec(body)?.[1] ?? 0),
          lastModified: Date.parse(/<LastModified>([^<]*)<\/LastModified>/.exec(body)?.[1] ?? "") ||
            0,
          etag: bareEtag(unescapeXml(/<ETag>([^<]*)<\/ETag>/.exec(body)?.[1] ?? "")),
        };
      }
      const truncated = /<IsTruncated>true<\/IsTruncated>/.test(xml);
      token = unescapeXml(/<NextContinuationToken>([^<]*)</.exec(xml)?.[1] ?? "");
      if (!truncated || !token) return;
    }
  }

  async createMultipart(key: string): Promise<string> {
    const res = await this.request("POST", key, { query: { uploads: "" } });
    const xml = await res.text();
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(xml)?.[1];
    if (!id) {
      throw new S3Error(res.status, "NoUploadId", `${this.label}: create multipart ${key}: ${xml}`);
    }
    return unescapeXml(id);
  }

  async uploadPart(key: string, uploadId: string, n: number, body: Uint8Array): Promise<string> {
    const res = await this.request("PUT", key, {
      query: { partNumber: String(n), uploadId },
      body,
    });
    await res.body?.cancel();
    if (res.status === 404) {
      throw new S3Error(404, "NoSuchUpload", `${this.label}: part ${n} of ${key}`);
    }
    return res.headers.get("etag") ?? "";
  }

  /** Copies [start, end] of `src` into part `n` on the server, no bytes through us. */
  async uploadPartCopy(
    key: string,
    uploadId: string,
    n: number,
    src: string,
    range: { start: number; end: number },
  ): Promise<string> {
    const res = await this.request("PUT", key, {
      query: { partNumber: String(n), uploadId },
      headers: {
        "x-amz-copy-source": this.copySource(src),
        "x-amz-copy-source-range": `bytes=${range.start}-${range.end}`,
      },
      timeoutMs: UPLOAD_TIMEOUT_MS,
    });
    const xml = await res.text();
    if (res.status === 404) throw new Deno.errors.NotFound(`s3 object ${src}`);
    const etag = /<ETag>([^<]+)<\/ETag>/.exec(xml)?.[1];
    if (!etag) {
      throw new S3Error(500, "CopyFailed", `${this.label}: part copy ${src}: ${xml.slice(0, 300)}`);
    }
    return unescapeXml(etag);
  }

  async completeMultipart(key: string, uploadId: string, etags: string[]): Promise<void> {
    const parts = etags.map((e, i) =>
      `<Part><PartNumber>${i + 1}</PartNumber><ETag>${escapeXml(e)}</ETag></Part>`
    ).join("");
    const body = new TextEncoder().encode(
      `<CompleteMultipartUpload>${parts}</CompleteMultipartUpload>`,
    );
    const res = await this.request("POST", key, {
      query: { uploadId },
      body,
      timeoutMs: UPLOAD_TIMEOUT_MS,
    });
    const xml = await res.text();
    if (res.status === 404 || xml.includes("<Error>")) {
      throw new S3Error(
        500,
        "CompleteFailed",
        `${this.label}: complete ${key}: ${xml.slice(0, 300)}`,
      );
    }
  }

  /** Aborts a multipart upload; false when the server does not implement abort. */
  async abortMultipart(key: string, uploadId: string): Promise<boolean> {
    const res = await this.request("DELETE", key, {
      query: { uploadId },
      accept: [400, 405, 501],
    });
    await res.body?.cancel();
    return res.ok || res.status === 404;
  }
}

/** An error and its causes in one line: fetch says "fetch failed" and keeps the why in `cause`. */
function causeOf(e: unknown): string {
  const parts: string[] = [];
  for (let c = e; c instanceof Error && parts.length < 4; c = c.cause) {
    if (!parts.some((p) => p.includes(c!.message))) parts.push(c.message);
  }
  return parts.join(": ") || String(e);
}

/** S3 accepted the request and did not start answering in time. */
class AnswerTimeout extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms / 1000} s`);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function encodeRfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

function unescapeXml(s: string): string {
  return s.replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, "<").replace(
    /&gt;/g,
    ">",
  ).replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n))).replace(/&amp;/g, "&");
}

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(
    /"/g,
    "&quot;",
  );
}
