// Shared plumbing for the API tests that talk to one TestServer: Deno.test options, a fetch with
// a timeout, and the assertions on status, OCI error bodies, Link headers and tag digests.
import assert from "node:assert/strict";
import type { TestServer } from "./server.ts";

/**
 * Deno.test options for a test whose steps share a withServer process: the server's log pump
 * runs across steps, so per-step op/resource sanitizers would report its reads; the server
 * itself is stopped and awaited by withServer.
 */
export const serverTestOpts = { sanitizeOps: false, sanitizeResources: false };

/** fetch of a path (or URL) on the server, with a timeout so a hung route fails the test. */
export function req(s: TestServer, path: string | URL, init: RequestInit = {}): Promise<Response> {
  return fetch(new URL(path, s.url), { ...init, signal: AbortSignal.timeout(20_000) });
}

/** A monolithic upload (POST ?digest=); the caller checks the answer. */
export function postBlob(
  s: TestServer,
  ns: string,
  digest: string,
  body?: Uint8Array,
  opts: { contentType?: string; query?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (opts.contentType !== undefined) headers["content-type"] = opts.contentType;
  return req(s, `/v2/${ns}/blobs/uploads/?digest=${digest}${opts.query ?? ""}`, {
    method: "POST",
    body: body as BodyInit | undefined,
    headers,
  });
}

export interface OciError {
  code: string;
  message: unknown;
  detail: unknown;
}

function firstError(text: string): OciError {
  const body = JSON.parse(text);
  assert.ok(Array.isArray(body.errors) && body.errors.length > 0, text);
  return body.errors[0];
}

function assertMessageAndDetail(e: OciError): void {
  assert.equal(typeof e.message, "string");
  assert.equal(typeof e.detail, "string");
}

/** Checks the status, that the body is `{errors: [...]}` and its first code; returns that error. */
export async function assertErrorCode(
  r: Response,
  status: number,
  code: string,
): Promise<OciError> {
  const text = await r.text();
  assert.equal(r.status, status, `expected ${status} ${code}, got ${r.status}: ${text}`);
  const e = firstError(text);
  assert.equal(e.code, code, text);
  return e;
}

/** A full OCI error (SPEC §Errors): status, code, and message and detail strings. */
export async function assertError(r: Response, status: number, code: string): Promise<void> {
  assertMessageAndDetail(await assertErrorCode(r, status, code));
}

/**
 * A store that cannot take the request (503 PROVIDER_UNAVAILABLE with a Retry-After), its
 * detail matching `detail`; returns the detail.
 */
export async function assertUnavailable(r: Response, detail: RegExp): Promise<string> {
  const e = await assertErrorCode(r, 503, "PROVIDER_UNAVAILABLE");
  assert.match(e.detail as string, detail);
  assert.ok(Number(r.headers.get("retry-after")) > 0, "Retry-After");
  return e.detail as string;
}

/** The code of an OCI error body whose code may be one of several; checks the rest of it. */
export async function errorCode(r: Response): Promise<string> {
  const e = firstError(await r.text());
  assertMessageAndDetail(e);
  return e.code;
}

/** Asserts the status, with the body in the failure message. */
export async function expectStatus(r: Response, status: number, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, `${what}: ${r.status} ${text}`);
}

export function bytesOf(r: Response): Promise<Uint8Array> {
  return r.arrayBuffer().then((b) => new Uint8Array(b));
}

/** The target of a `Link: <...>; rel="next"` header, or null. */
export function nextLink(r: Response): string | null {
  const link = r.headers.get("link");
  if (link === null) return null;
  const m = /^<([^>]+)>;\s*rel="?next"?$/.exec(link.trim());
  assert.ok(m, `malformed Link header: ${link}`);
  return m[1];
}

/** The digest a tag (or digest reference) resolves to, or null when it answers 404. */
export async function tagDigest(s: TestServer, ns: string, tag: string): Promise<string | null> {
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, { method: "HEAD" });
  await r.body?.cancel();
  if (r.status === 404) return null;
  assert.equal(r.status, 200, `HEAD ${ns}:${tag}`);
  return r.headers.get("docker-content-digest");
}
