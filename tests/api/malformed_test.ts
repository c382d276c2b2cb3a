// Generated bad input against every route. Requests go over raw TCP because fetch normalises
// `..`, refuses bad Content-Length values and cannot send a body shorter than its length.
// Invariants: nothing answers 5xx or hangs, every 4xx body under /v2/ is an OCI error body whose
// code matches its status (SPEC §Errors), a set of SPEC rules hold for specific inputs, and the
// content pushed beforehand is intact afterwards.
import assert from "node:assert/strict";
import { pushImage, sha256Hex, startServer, type TestServer } from "../helpers/server.ts";

const SEED = 0x0c1_5eed;
const KNOWN = "library/known";
const SCRATCH = "fuzz/scratch";
const OTHER = "fuzz/other";
const MAX_MANIFEST = 64 * 1024;
const TIMEOUT_MS = 15_000;
const CONCURRENCY = 6;
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

// SPEC §Errors: each 4xx code and the statuses it may carry.
const SPEC_CODES: Record<string, number[]> = {
  BLOB_UNKNOWN: [404],
  BLOB_UPLOAD_INVALID: [413],
  BLOB_UPLOAD_UNKNOWN: [404],
  DIGEST_INVALID: [400],
  MANIFEST_BLOB_UNKNOWN: [404],
  MANIFEST_INVALID: [400, 413],
  MANIFEST_UNKNOWN: [404],
  NAME_INVALID: [400],
  NAME_UNKNOWN: [404],
  SIZE_INVALID: [416],
  UNAUTHORIZED: [401],
  DENIED: [403, 405, 409],
  UNSUPPORTED: [400],
  REPLICATION_SUPERSEDED: [409],
};

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Expect {
  status: number[];
  /** checked when the response has a body */
  codes?: string[];
}

interface Case {
  label: string;
  method: string;
  /** raw request-target; `@FRESH@` becomes a new session's uuid in SCRATCH, `@SHARED@` a session
   * many cases share, `@FOREIGN@` a live session of OTHER */
  target: string;
  headers?: [string, string][];
  body?: Uint8Array;
  /** `length` adds Content-Length, `chunked` encodes the body, `raw` leaves framing to headers */
  framing?: "length" | "chunked" | "raw";
  /** half-close after writing, for bodies shorter than their declared length */
  halfClose?: boolean;
  /** the connection may end without a response (the body never completed) */
  mayDrop?: boolean;
  expect?: Expect;
  /** extra check after the response; returns a problem or null */
  check?: (r: RawResponse, c: Case) => Promise<string | null>;
}

interface RawResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
  error?: string;
}

// ---------------------------------------------------------------- raw HTTP/1.1 client

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function indexOfCrlf(b: Uint8Array, from: number, double: boolean): number {
  for (let i = from; i + (double ? 3 : 1) < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && (!double || (b[i + 2] === 13 && b[i + 3] === 10))) {
      return i;
    }
  }
  return -1;
}

function dechunk(b: Uint8Array): { body: Uint8Array; complete: boolean } {
  const parts: Uint8Array[] = [];
  let i = 0;
  while (true) {
    const le = indexOfCrlf(b, i, false);
    if (le < 0) return { body: concat(parts), complete: false };
    const size = parseInt(dec.decode(b.subarray(i, le)).split(";")[0], 16);
    if (Number.isNaN(size)) return { body: concat(parts), complete: false };
    if (size === 0) return { body: concat(parts), complete: true };
    const start = le + 2;
    if (b.length < start + size + 2) {
      parts.push(b.subarray(start, Math.min(b.length, start + size)));
      return { body: concat(parts), complete: false };
    }
    parts.push(b.subarray(start, start + size));
    i = start + size + 2;
  }
}

function parseResponse(b: Uint8Array, method: string): RawResponse & { complete: boolean } {
  const empty = { status: 0, headers: new Headers(), body: new Uint8Array(0), complete: false };
  const he = indexOfCrlf(b, 0, true);
  if (he < 0) return empty;
  const lines = dec.decode(b.subarray(0, he)).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0])?.[1] ?? 0);
  const rest = b.subarray(he + 4);
  // an interim 1xx precedes the real response
  if (status >= 100 && status < 200 && status !== 101) return parseResponse(rest, method);
  const headers = new Headers();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) {
      try {
        headers.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
      } catch { /* a header value fetch's Headers refuses; irrelevant here */ }
    }
  }
  if (method === "HEAD" || status === 204 || status === 304) {
    return { status, headers, body: new Uint8Array(0), complete: true };
  }
  if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    return { status, headers, ...dechunk(rest) };
  }
  const cl = headers.get("content-length");
  if (cl !== null) {
    const n = Number(cl);
    return { status, headers, body: rest.subarray(0, n), complete: rest.length >= n };
  }
  return { status, headers, body: rest, complete: false };
}

function chunkBody(body: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let i = 0; i < body.length; i += 4096) {
    const c = body.subarray(i, i + 4096);
    parts.push(enc.encode(`${c.length.toString(16)}\r\n`), c, enc.encode("\r\n"));
  }
  parts.push(enc.encode("0\r\n\r\n"));
  return concat(parts);
}

async function send(port: number, c: Case): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      conn.close();
    } catch { /* already closed */ }
  }, TIMEOUT_MS);
  const received: Uint8Array[] = [];
  let error: string | undefined;
  try {
    const head = [
      `${c.method} ${c.target} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      "Connection: close",
    ];
    for (const [k, v] of c.headers ?? []) head.push(`${k}: ${v}`);
    const framing = c.framing ?? (c.body ? "length" : "raw");
    let payload = c.body ?? new Uint8Array(0);
    if (framing === "length") head.push(`Content-Length: ${payload.length}`);
    if (framing === "chunked") {
      head.push("Transfer-Encoding: chunked");
      payload = chunkBody(payload);
    }
    const bytes = concat([enc.encode(head.join("\r\n") + "\r\n\r\n"), payload]);
    try {
      for (let o = 0; o < bytes.length;) o += await conn.write(bytes.subarray(o));
      if (c.halfClose) {
        // Deno.serve drops body bytes that arrive together with the FIN, so let them land first,
        // as they would from a client that dies mid-body
        await new Promise((r) => setTimeout(r, 100));
        await conn.closeWrite();
      }
    } catch (e) {
      // the server may answer and close before reading a body it rejects; read what it sent
      error = `write: ${(e as Error).message}`;
    }
    const buf = new Uint8Array(64 * 1024);
    while (true) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (e) {
        error ??= `read: ${(e as Error).message}`;
        break;
      }
      if (n === null) break;
      received.push(buf.slice(0, n));
      if (parseResponse(concat(received), c.method).complete) break;
    }
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer */ }
  }
  const { status, headers, body } = parseResponse(concat(received), c.method);
  if (timedOut) error = "timed out";
  return { status, headers, body, error };
}

// ---------------------------------------------------------------- corpus

function mulberry32(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Known {
  digest: string;
  body: Uint8Array;
  config: string;
  configBytes: Uint8Array;
  layer: string;
  layerBytes: Uint8Array;
  indexDigest: string;
  indexBody: Uint8Array;
  tags: unknown;
  catalog: unknown;
  /** a valid, never pushed digest */
  absent: string;
  /** digest of the 100-byte blob a short monolithic POST announces */
  shortBlob: string;
}

const json = (v: unknown) => enc.encode(JSON.stringify(v));
const oneOf = (...s: number[]) => ({ status: s });
const err = (status: number[], ...codes: string[]) => ({ status, codes });

function manifestOf(k: Known, patch: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: k.config, size: k.configBytes.length },
    layers: [{ mediaType: OCI_LAYER, digest: k.layer, size: k.layerBytes.length }],
    ...patch,
  };
}

/** Upload status reports `Range` as the spec's committed window. */
function rangeIs(want: string): (r: RawResponse) => Promise<string | null> {
  return (r) =>
    Promise.resolve(
      r.status === 0 || r.headers.get("range") === want
        ? null
        : `Range ${r.headers.get("range")}, want ${want}`,
    );
}

function buildCorpus(k: Known, rand: () => number): Case[] {
  const cases: Case[] = [];
  const add = (c: Case) => cases.push(c);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rand() * a.length)];
  const layerHex = k.layer.slice("sha256:".length);
  const validManifest = k.body;
  const ociJson: [string, string][] = [["Content-Type", OCI_MANIFEST]];

  // Names that are one path segment run but break the grammar: NAME_INVALID or NAME_UNKNOWN.
  const badNames = [
    "Library/Known",
    "UPPER",
    "library/Known",
    "a".repeat(300),
    "ab/".repeat(100) + "c",
    encodeURI("näme"),
    "näme",
    encodeURI("名前/x"),
    "-lead",
    "trail-",
    "a___b",
    "a.-b",
    "a..b",
    "_x",
    "x%20y",
    "x%00y",
  ];
  // Names that break the path structure; any 4xx will do, but reads only so that a server which
  // normalises them cannot damage the known image.
  const structNames = [
    "library//known",
    "/library/known",
    "library/known/",
    "",
    "..",
    "library/../known",
    "library/./known",
    "library%2Fknown",
    "library%2fknown",
    "..%2Flibrary%2Fknown",
    "%2e%2e/library",
    "%zz",
  ];
  const nameExpect = err([400, 404], "NAME_INVALID", "NAME_UNKNOWN");
  for (const n of badNames) {
    const routes: [string, string, Partial<Case>][] = [
      ["GET", `/v2/${n}/tags/list`, {}],
      ["GET", `/v2/${n}/manifests/latest`, {}],
      ["HEAD", `/v2/${n}/manifests/latest`, {}],
      ["GET", `/v2/${n}/blobs/${k.layer}`, {}],
      ["HEAD", `/v2/${n}/blobs/${k.layer}`, {}],
      ["GET", `/v2/${n}/referrers/${k.digest}`, {}],
      ["POST", `/v2/${n}/blobs/uploads/`, {}],
      ["DELETE", `/v2/${n}/manifests/latest`, {}],
      ["DELETE", `/v2/${n}/blobs/${k.config}`, {}],
      ["PUT", `/v2/${n}/manifests/fuzz`, { body: validManifest, headers: ociJson }],
    ];
    for (const [method, target, extra] of routes) {
      add({ label: "name", method, target, expect: nameExpect, ...extra });
    }
  }
  for (const n of structNames) {
    for (const path of ["tags/list", "manifests/latest", `blobs/${k.layer}`]) {
      add({ label: "name-structure", method: "GET", target: `/v2/${n}/${path}` });
    }
    add({ label: "name-structure", method: "HEAD", target: `/v2/${n}/manifests/latest` });
  }

  // Digests that break `<algorithm>:<hex>` (SPEC: sha256 or sha512, lowercase hex of that length).
  const badDigests = [
    `md5:${"d".repeat(32)}`,
    "sha256:abc",
    `sha256:${layerHex.slice(1)}`,
    `sha256:${layerHex}0`,
    `sha256:${layerHex.toUpperCase()}`,
    `sha512:${layerHex}`,
    `sha256:${"g".repeat(64)}`,
    "sha256:",
    `:${layerHex}`,
    `SHA256:${layerHex}`,
    `sha256:${layerHex}%00`,
    `sha256:${layerHex}:${layerHex}`,
    `sha256+b64:${layerHex}`,
  ];
  const digestExpect = err([400], "DIGEST_INVALID");
  for (const d of badDigests) {
    const q = encodeURIComponent(d);
    add({
      label: "digest",
      method: "GET",
      target: `/v2/${KNOWN}/blobs/${d}`,
      expect: digestExpect,
    });
    add({ label: "digest", method: "HEAD", target: `/v2/${KNOWN}/blobs/${d}`, expect: oneOf(400) });
    add({
      label: "digest",
      method: "DELETE",
      target: `/v2/${KNOWN}/blobs/${d}`,
      expect: digestExpect,
    });
    add({
      label: "digest",
      method: "GET",
      target: `/v2/${KNOWN}/manifests/${d}`,
      expect: oneOf(400, 404),
    });
    add({
      label: "digest",
      method: "HEAD",
      target: `/v2/${KNOWN}/manifests/${d}`,
      expect: oneOf(400, 404),
    });
    add({
      label: "digest",
      method: "DELETE",
      target: `/v2/${KNOWN}/manifests/${d}`,
      expect: oneOf(400, 404),
    });
    add({
      label: "digest",
      method: "GET",
      target: `/v2/${KNOWN}/referrers/${d}`,
      expect: digestExpect,
    });
    add({
      label: "digest",
      method: "PUT",
      target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@?digest=${q}`,
      framing: "length",
      expect: digestExpect,
    });
    add({
      label: "digest",
      method: "POST",
      target: `/v2/${SCRATCH}/blobs/uploads/?digest=${q}`,
      body: enc.encode("x"),
      expect: digestExpect,
    });
    add({
      label: "digest",
      method: "POST",
      target: `/v2/${SCRATCH}/blobs/uploads/?mount=${q}`,
      expect: oneOf(400),
    });
    add({
      label: "digest",
      method: "POST",
      target: `/v2/${SCRATCH}/blobs/uploads/?mount=${q}&from=${KNOWN}`,
      expect: oneOf(400),
    });
    add({
      label: "digest",
      method: "PUT",
      target: `/v2/${KNOWN}/manifests/${d}`,
      body: validManifest,
      headers: ociJson,
      expect: oneOf(400),
    });
  }
  // Pushing a manifest under a digest it does not hash to.
  add({
    label: "digest",
    method: "PUT",
    target: `/v2/${KNOWN}/manifests/${k.absent}`,
    body: validManifest,
    headers: ociJson,
    expect: digestExpect,
  });

  // Tags outside `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
  const badTags = [
    "a".repeat(129),
    "a".repeat(300),
    "-lead",
    ".dot",
    "has%20space",
    "tag%2Fslash",
    "tag@at",
    "t%C3%BCg",
    "tüg",
    "*",
    "tag%00",
    "tag;x",
    "tag%3Fq",
  ];
  for (const t of badTags) {
    const m = `/v2/${KNOWN}/manifests/${t}`;
    add({ label: "tag", method: "GET", target: m, expect: oneOf(400, 404) });
    add({ label: "tag", method: "HEAD", target: m, expect: oneOf(400, 404) });
    add({ label: "tag", method: "DELETE", target: m, expect: oneOf(400, 404) });
    add({
      label: "tag",
      method: "PUT",
      target: m,
      body: validManifest,
      headers: ociJson,
      expect: oneOf(400),
    });
    add({
      label: "tag-param",
      method: "PUT",
      target: `/v2/${KNOWN}/manifests/${k.digest}?tag=${t}`,
      body: validManifest,
      headers: ociJson,
      expect: oneOf(400),
    });
  }

  // Upload ids that are not this namespace's sessions.
  const uploadIds: [string, Expect][] = [
    ["@FOREIGN@", err([404], "BLOB_UPLOAD_UNKNOWN")],
    ["00000000-0000-0000-0000-000000000000", err([404], "BLOB_UPLOAD_UNKNOWN")],
    ["not-a-uuid", oneOf(400, 404)],
    ["@FRESH@/extra", oneOf(400, 404)],
    ["..%2F@FRESH@", oneOf(400, 404)],
    ["%00", oneOf(400, 404)],
    ["a".repeat(300), oneOf(400, 404)],
    ["@FRESH@%00", oneOf(400, 404)],
  ];
  for (const [id, expect] of uploadIds) {
    const u = `/v2/${SCRATCH}/blobs/uploads/${id}`;
    add({ label: "upload-id", method: "GET", target: u, expect });
    add({
      label: "upload-id",
      method: "PATCH",
      target: u,
      body: enc.encode("abcd"),
      headers: [["Content-Range", "0-3"], ["Content-Type", "application/octet-stream"]],
      expect,
    });
    add({
      label: "upload-id",
      method: "PUT",
      target: `${u}?digest=${k.absent}`,
      framing: "length",
      expect,
    });
    add({ label: "upload-id", method: "DELETE", target: u, expect });
  }

  // Blob GET Range handling (SPEC §Blobs, rules 4-6) over the 1000-byte known layer.
  const ranges: [string, Expect][] = [
    ["garbage", oneOf(200)],
    ["bytes=abc-def", oneOf(200)],
    ["bytes=10-5", oneOf(200)],
    ["items=0-1", oneOf(200)],
    ["0-1", oneOf(200)],
    ["bytes=0-1,3-4", oneOf(200)],
    ["bytes=", oneOf(200)],
    ["bytes=--1", oneOf(200)],
    ["bytes=1-2-3", oneOf(200)],
    ["bytes=-0", err([416], "SIZE_INVALID")],
    ["bytes=1000-", err([416], "SIZE_INVALID")],
    ["bytes=5000-6000", err([416], "SIZE_INVALID")],
    ["bytes=99999999999999999999-", oneOf(200, 416)],
    ["bytes=5-99999999999999999999", oneOf(200, 206)],
    ["bytes=-99999999999999999999", oneOf(200, 206)],
    ["bytes=\u00ff", oneOf(200)],
  ];
  for (const [range, expect] of ranges) {
    const target = `/v2/${KNOWN}/blobs/${k.layer}`;
    add({ label: "range", method: "GET", target, headers: [["Range", range]], expect });
    add({ label: "range", method: "HEAD", target, headers: [["Range", range]] });
  }

  // PATCH Content-Range (SPEC §Blob upload, PATCH rules 1-2) with a 4-byte chunk on a new session.
  const contentRanges: [string, Expect][] = [
    ["bytes=0-3", oneOf(416)],
    ["5-8", oneOf(416)],
    ["3-0", oneOf(416)],
    ["0-2", oneOf(416)],
    ["0-4", oneOf(416)],
    ["0-99999999999999999999", oneOf(416)],
    ["bytes 0-3", oneOf(400, 416)],
    ["garbage", oneOf(400, 416)],
    ["-1-2", oneOf(400, 416)],
    ["0-3-4", oneOf(400, 416)],
    ["0x0-0x3", oneOf(400, 416)],
    ["", oneOf(202, 400, 416)],
    ["0-", oneOf(202, 400, 416)],
  ];
  for (const [cr, expect] of contentRanges) {
    add({
      label: "content-range",
      method: "PATCH",
      target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@`,
      body: enc.encode("abcd"),
      headers: [["Content-Range", cr], ["Content-Type", "application/octet-stream"]],
      expect,
    });
  }
  // A refused chunk commits nothing (PATCH rule 2): the session still reports an empty window.
  add({
    label: "content-range",
    method: "PATCH",
    target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@`,
    body: enc.encode("abcd"),
    headers: [["Content-Range", "bytes=0-3"]],
    expect: oneOf(416),
    check: async (_r, c) => {
      const path = c.target;
      const s = await fetch(`${baseUrl}${path}`);
      await s.body?.cancel();
      if (s.status === 404) return null; // a 416 may also cancel the session
      return s.headers.get("range") === "0-0" ? null : `after 416, Range ${s.headers.get("range")}`;
    },
  });

  // Content-Length values hyper or the server must refuse (PATCH rule 4), sent verbatim.
  const badLengths: [string[], Expect | undefined][] = [
    [["abc"], oneOf(400)],
    [["-1"], oneOf(400)],
    [["1.5"], oneOf(400)],
    [["4, 5"], oneOf(400)],
    [["4", "5"], oneOf(400)],
    [["+4"], undefined],
    [["0x4"], undefined],
    [["99999999999999999999999"], undefined],
    [[" 4 "], undefined],
  ];
  for (const [values, expect] of badLengths) {
    const headers: [string, string][] = values.map((v) => ["Content-Length", v]);
    headers.push(["Content-Range", "0-3"]);
    for (const target of [`/v2/${SCRATCH}/blobs/uploads/@FRESH@`]) {
      add({
        label: "content-length",
        method: "PATCH",
        target,
        headers,
        body: enc.encode("abcd"),
        framing: "raw",
        halfClose: true,
        mayDrop: expect === undefined,
        expect,
      });
    }
    add({
      label: "content-length",
      method: "PUT",
      target: `/v2/${KNOWN}/manifests/fuzz`,
      headers: [...values.map((v): [string, string] => ["Content-Length", v]), ...ociJson],
      body: enc.encode("{}"),
      framing: "raw",
      halfClose: true,
      mayDrop: true,
    });
  }
  add({
    label: "content-length",
    method: "PATCH",
    target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@`,
    headers: [["Content-Length", "4"], ["Transfer-Encoding", "chunked"]],
    body: chunkBody(enc.encode("abcd")),
    framing: "raw",
  });
  add({
    label: "content-length",
    method: "PATCH",
    target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@`,
    headers: [["Content-Length", "2"]],
    body: enc.encode("abcd"),
    framing: "raw",
  });
  // A body shorter than its Content-Length commits what arrived (PATCH rule 5).
  add({
    label: "short-body",
    method: "PATCH",
    target: `/v2/${SCRATCH}/blobs/uploads/@FRESH@`,
    headers: [["Content-Length", "100"], ["Content-Range", "0-99"]],
    body: enc.encode("0123456789"),
    framing: "raw",
    halfClose: true,
    mayDrop: true,
    expect: oneOf(0, 202),
    check: async (r, c) => {
      if (r.status === 202) return await rangeIs("0-9")(r);
      // the transport lost the answer; the session must still hold the 10 bytes
      const s = await fetch(`${baseUrl}${c.target}`);
      await s.body?.cancel();
      return s.headers.get("range") === "0-9"
        ? null
        : `short body: no answer, then status ${s.status} Range ${s.headers.get("range")}`;
    },
  });
  // A monolithic push cut short must store nothing (checked again once all cases ran).
  add({
    label: "short-body",
    method: "POST",
    target: `/v2/${SCRATCH}/blobs/uploads/?digest=${k.shortBlob}`,
    headers: [["Content-Length", "100"], ["Content-Type", "application/octet-stream"]],
    body: new Uint8Array(10),
    framing: "raw",
    halfClose: true,
    mayDrop: true,
  });
  add({
    label: "short-body",
    method: "PUT",
    target: `/v2/${KNOWN}/manifests/fuzz`,
    headers: [["Content-Length", String(validManifest.length + 50)], ...ociJson],
    body: validManifest.subarray(0, 50),
    framing: "raw",
    halfClose: true,
    mayDrop: true,
  });

  // Query values.
  for (const base of [`/v2/${KNOWN}/tags/list`, "/v2/_catalog"]) {
    add({
      label: "query",
      method: "GET",
      target: `${base}?n=-1`,
      expect: err([400], "UNSUPPORTED"),
    });
    add({
      label: "query",
      method: "GET",
      target: `${base}?n=abc`,
      expect: err([400], "UNSUPPORTED"),
    });
    for (
      const q of [
        "n=1e9",
        "n=",
        "n=0",
        "n=99999999999999999999",
        "n=1.5",
        "n=%00",
        "n=1&n=2",
        "last=%00",
        "last=%FF",
        "last=..%2F..",
        `last=${"z".repeat(300)}`,
        "last=%C3%BC",
        "last=",
        "n=1&last=%2F%2F",
        "n=1&last=%zz",
      ]
    ) add({ label: "query", method: "GET", target: `${base}?${q}` });
  }
  for (const q of ["ns=%00", "ns=Garbage", `ns=${"x".repeat(300)}`]) {
    add({
      label: "query",
      method: "GET",
      target: `/v2/${KNOWN}/manifests/latest?${q}`,
      expect: oneOf(200),
    });
  }
  const posts: [string, Expect | undefined][] = [
    ["digest-algorithm=md5", oneOf(400)],
    ["digest-algorithm=", oneOf(400)],
    ["digest-algorithm=SHA256", undefined],
    ["mount=garbage&from=UPPER", oneOf(400)],
    ["mount=garbage", oneOf(400)],
    [`mount=${k.absent}&from=UPPER`, oneOf(400)],
    [`mount=${k.layer}&from=..%2F..`, oneOf(400)],
    [`mount=${k.layer}&from=Library%2FKnown`, oneOf(400)],
    ["digest=garbage", err([400], "DIGEST_INVALID")],
    [`digest=${k.absent}&digest-algorithm=sha512`, undefined],
    ["mount=&from=", undefined],
  ];
  for (const [q, expect] of posts) {
    add({
      label: "post-query",
      method: "POST",
      target: `/v2/${SCRATCH}/blobs/uploads/?${q}`,
      expect,
    });
  }

  // Manifest bodies, all pushed as tag `fuzz` of the known namespace: each must be refused.
  const invalid = err([400], "MANIFEST_INVALID");
  const invalidOrDigest = err([400], "MANIFEST_INVALID", "DIGEST_INVALID");
  const deep = "[".repeat(30_000) + "]".repeat(30_000);
  const bodies: [string, Uint8Array, string, Expect][] = [
    ["not json", enc.encode("not json"), OCI_MANIFEST, invalid],
    ["empty", new Uint8Array(0), OCI_MANIFEST, invalid],
    ["array", enc.encode("[]"), OCI_MANIFEST, invalid],
    ["null", enc.encode("null"), OCI_MANIFEST, invalid],
    ["number", enc.encode("42"), OCI_MANIFEST, invalid],
    ["string", enc.encode('"manifest"'), OCI_MANIFEST, invalid],
    ["truncated", enc.encode('{"schemaVersion":2,'), OCI_MANIFEST, invalid],
    ["schemaVersion 1", json(manifestOf(k, { schemaVersion: 1 })), OCI_MANIFEST, invalid],
    ["schemaVersion string", json(manifestOf(k, { schemaVersion: "2" })), OCI_MANIFEST, invalid],
    ["no schemaVersion", json(manifestOf(k, { schemaVersion: undefined })), OCI_MANIFEST, invalid],
    [
      "config bad digest",
      json(manifestOf(k, { config: { mediaType: OCI_CONFIG, digest: "sha256:abc", size: 1 } })),
      OCI_MANIFEST,
      invalidOrDigest,
    ],
    [
      "layer uppercase digest",
      json(manifestOf(k, {
        layers: [{ mediaType: OCI_LAYER, digest: k.layer.toUpperCase(), size: 1000 }],
      })),
      OCI_MANIFEST,
      invalidOrDigest,
    ],
    [
      "config negative size",
      json(manifestOf(k, { config: { mediaType: OCI_CONFIG, digest: k.config, size: -1 } })),
      OCI_MANIFEST,
      invalid,
    ],
    [
      "config string size",
      json(manifestOf(k, { config: { mediaType: OCI_CONFIG, digest: k.config, size: "12" } })),
      OCI_MANIFEST,
      invalid,
    ],
    [
      "config fractional size",
      json(manifestOf(k, { config: { mediaType: OCI_CONFIG, digest: k.config, size: 1.5 } })),
      OCI_MANIFEST,
      invalid,
    ],
    [
      "layer bad mediaType",
      json(manifestOf(k, {
        layers: [{ mediaType: "not a media type", digest: k.layer, size: 1000 }],
      })),
      OCI_MANIFEST,
      invalid,
    ],
    ["no config", json(manifestOf(k, { config: undefined })), OCI_MANIFEST, invalid],
    ["layers object", json(manifestOf(k, { layers: {} })), OCI_MANIFEST, invalid],
    [
      "config deeply nested",
      enc.encode(`{"schemaVersion":2,"config":${deep},"layers":[]}`),
      OCI_MANIFEST,
      invalid,
    ],
    [
      "subject bad digest",
      json(manifestOf(k, { subject: { mediaType: OCI_MANIFEST, digest: "sha256:zz", size: 1 } })),
      OCI_MANIFEST,
      invalidOrDigest,
    ],
    [
      "index manifests not array",
      json({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: "x" }),
      OCI_INDEX,
      invalid,
    ],
    [
      "utf-16",
      new Uint8Array(new Uint16Array([...'{"a":1}'].map((ch) => ch.charCodeAt(0))).buffer),
      OCI_MANIFEST,
      invalid,
    ],
    // SPEC §Manifests rule 6: Content-Type must agree with the body's mediaType.
    ["content-type index", validManifest, OCI_INDEX, invalid],
    ["content-type text/plain", validManifest, "text/plain", invalid],
    ["content-type weird", validManifest, "application/x-weird+json; charset=utf-8", invalid],
    ["content-type garbage", validManifest, "%%%", invalid],
    [
      "over max_manifest_size",
      json(manifestOf(k, { annotations: { pad: "x".repeat(MAX_MANIFEST + 1024) } })),
      OCI_MANIFEST,
      err([413], "MANIFEST_INVALID"),
    ],
  ];
  for (const [what, body, ct, expect] of bodies) {
    const target = `/v2/${KNOWN}/manifests/fuzz`;
    add({
      label: `manifest ${what}`,
      method: "PUT",
      target,
      body,
      headers: [["Content-Type", ct]],
      expect,
    });
  }
  const huge = json(manifestOf(k, { annotations: { pad: "y".repeat(MAX_MANIFEST * 2) } }));
  add({
    label: "manifest over max_manifest_size, chunked",
    method: "PUT",
    target: `/v2/${KNOWN}/manifests/fuzz`,
    body: huge,
    framing: "chunked",
    headers: ociJson,
    expect: err([413], "MANIFEST_INVALID"),
  });

  // Referrers filter (SPEC §Referrers rule 3).
  for (const at of ["notamediatype", "a/b/c", "%00", "%20/%20", `${"a".repeat(200)}/x`]) {
    add({
      label: "referrers",
      method: "GET",
      target: `/v2/${KNOWN}/referrers/${k.digest}?artifactType=${at}`,
      expect: err([400], "DIGEST_INVALID"),
    });
  }
  for (const q of ["artifactType=", "last=garbage", "n=5", "last=%00"]) {
    add({ label: "referrers", method: "GET", target: `/v2/${KNOWN}/referrers/${k.digest}?${q}` });
  }

  // Weird media types in Accept on pulls of the known image.
  for (
    const accept of [
      "garbage",
      "*/*;q=abc",
      `${OCI_INDEX};q=-1`,
      "application/x-weird",
      ",,,",
      "a/b;" + "x=y;".repeat(2000),
    ]
  ) {
    add({
      label: "accept",
      method: "GET",
      target: `/v2/${KNOWN}/manifests/latest`,
      headers: [["Accept", accept]],
    });
    add({
      label: "accept",
      method: "HEAD",
      target: `/v2/${KNOWN}/manifests/idx`,
      headers: [["Accept", accept]],
    });
  }

  // Health, version check, unknown paths and methods.
  add({ label: "health", method: "GET", target: "/healthz", expect: oneOf(200) });
  add({ label: "health", method: "GET", target: "/readyz", expect: oneOf(200) });
  add({ label: "version", method: "GET", target: "/v2/", expect: oneOf(200) });
  add({ label: "version", method: "HEAD", target: "/v2/", expect: oneOf(200) });
  add({ label: "version", method: "GET", target: "/v2/?ns=%00", expect: oneOf(200) });
  const odd: [string, string][] = [
    ["GET", "/healthz?x=%00"],
    ["POST", "/healthz"],
    ["DELETE", "/readyz"],
    ["HEAD", "/readyz"],
    ["GET", "/healthz/extra"],
    ["GET", "/"],
    ["GET", "/nonexistent"],
    ["GET", "/v3/"],
    ["GET", "/v2"],
    ["PUT", "/v2/"],
    ["DELETE", "/v2/"],
    ["POST", "/v2/"],
    ["PATCH", "/v2/"],
    ["FOO", "/v2/"],
    ["OPTIONS", "/v2/"],
    ["TRACE", "/v2/"],
    ["CONNECT", "/v2/"],
    ["PROPFIND", `/v2/${KNOWN}/manifests/latest`],
    ["POST", "/v2/_catalog"],
    ["DELETE", "/v2/_catalog"],
    ["DELETE", `/v2/${KNOWN}/tags/list`],
    ["PATCH", `/v2/${KNOWN}/manifests/latest`],
    ["POST", `/v2/${KNOWN}/manifests/latest`],
    ["POST", `/v2/${KNOWN}/blobs/${k.layer}`],
    ["PUT", `/v2/${KNOWN}/blobs/${k.layer}`],
    ["PATCH", `/v2/${KNOWN}/blobs/${k.layer}`],
    ["GET", `/v2/${KNOWN}/blobs/uploads/`],
    ["PUT", `/v2/${KNOWN}/blobs/uploads/`],
    ["DELETE", `/v2/${KNOWN}/blobs/uploads/`],
    ["GET", `/v2/${KNOWN}`],
    ["GET", `/v2/${KNOWN}/`],
    ["GET", `/v2/${KNOWN}/unknown`],
    ["GET", `/v2/${KNOWN}/blobs/`],
    ["GET", `/v2/${KNOWN}/manifests/`],
    ["GET", `/v2/${KNOWN}/tags/`],
    ["GET", `/v2/${KNOWN}/tags/list/extra`],
    ["GET", `/v2/${KNOWN}/referrers/`],
    ["GET", `/v2/${KNOWN}/_svc/`],
    ["GET", "/v2/_svc/nope"],
    ["GET", "/v2/_catalog/extra"],
    ["GET", "/v2//"],
    ["GET", "/v2/%"],
    ["GET", "/v2/%zz/tags/list"],
    ["GET", "http://127.0.0.1/v2/"],
    ["OPTIONS", "*"],
    ["GET", "/v2/#x"],
    ["GET", `/v2/${"a/".repeat(5000)}tags/list`],
  ];
  for (const [method, target] of odd) add({ label: "route", method, target });
  add({ label: "auth", method: "GET", target: "/v2/", headers: [["Authorization", "Basic !!!"]] });
  add({
    label: "auth",
    method: "GET",
    target: "/v2/",
    headers: [["Authorization", "Bearer x.y.z"]],
  });
  add({ label: "auth", method: "GET", target: "/v2/", headers: [["Authorization", "Negotiate"]] });

  // Seeded random combinations: every one carries at least one malformed slot, and a write to
  // the known namespace always carries a malformed reference, so none of them can be valid.
  const names = [KNOWN, SCRATCH, ...badNames, ...structNames.slice(0, 6)];
  const refs = ["latest", "idx", k.digest, ...badTags, ...badDigests];
  const digests = [k.layer, k.config, k.absent, ...badDigests];
  const headerNoise: [string, string][] = [
    ["Range", "bytes=0-1"],
    ["Range", pick(ranges)[0]],
    ["Content-Range", "bytes=0-3"],
    ["Content-Type", "application/x-weird"],
    ["Content-Type", OCI_INDEX],
    ["Accept", "*/*"],
    ["X-Svc-No-Redirect", "1"],
    ["X-Svc-Source-Timestamp", "not-a-time"],
    ["Expect", "100-continue"],
    ["Content-Encoding", "gzip"],
  ];
  const bodyPool = [
    undefined,
    new Uint8Array(0),
    enc.encode("garbage"),
    enc.encode("{}"),
    enc.encode('{"schemaVersion":2}'),
    new Uint8Array(3000).map((_, i) => (i * 31) & 0xff),
  ];
  const badOf = <T>(pool: T[], good: number) => pool.slice(good);
  const templates: ((bad: boolean) => { method: string; target: string; known: boolean })[] = [
    (bad) => {
      const n = bad ? pick(badOf(names, 2)) : pick(names.slice(0, 2));
      return {
        method: pick(["GET", "HEAD", "PUT", "DELETE", "POST"]),
        target: `/v2/${n}/tags/list`,
        known: n === KNOWN,
      };
    },
    (bad) => {
      const n = pick(names.slice(0, 2));
      const r = bad ? pick(badOf(refs, 3)) : pick(refs.slice(0, 3));
      return {
        method: pick(["GET", "HEAD", "PUT", "DELETE"]),
        target: `/v2/${n}/manifests/${r}`,
        known: n === KNOWN,
      };
    },
    (bad) => {
      const n = pick(names.slice(0, 2));
      const d = bad ? pick(badOf(digests, 3)) : pick(digests.slice(0, 3));
      return {
        method: pick(["GET", "HEAD", "DELETE"]),
        target: `/v2/${n}/blobs/${d}`,
        known: n === KNOWN,
      };
    },
    (bad) => {
      const d = bad ? pick(badOf(digests, 3)) : pick(digests.slice(0, 3));
      const key = pick(["digest", "mount", "digest-algorithm", "from"]);
      return {
        method: "POST",
        target: `/v2/${SCRATCH}/blobs/uploads/?${key}=${bad ? d : "x%00"}`,
        known: false,
      };
    },
    (bad) => {
      const id = bad ? pick(uploadIds)[0] : "@SHARED@";
      const d = pick(digests);
      return {
        method: pick(["GET", "PATCH", "PUT", "DELETE"]),
        target: `/v2/${SCRATCH}/blobs/uploads/${id}?digest=${d}`,
        known: false,
      };
    },
    (bad) => {
      const n = pick(names.slice(0, 2));
      const d = bad ? pick(badOf(digests, 3)) : pick(digests.slice(0, 3));
      return {
        method: "GET",
        target: `/v2/${n}/referrers/${d}?artifactType=%25%25`,
        known: n === KNOWN,
      };
    },
  ];
  for (let i = 0; i < 150; i++) {
    // a template whose only slot is valid still gets malformed headers, body or method
    const bad = rand() < 0.8;
    const t = pick(templates)(bad);
    if (!bad && t.known && t.method !== "GET" && t.method !== "HEAD") continue;
    const headers: [string, string][] = [];
    for (let h = Math.floor(rand() * 3); h > 0; h--) headers.push(pick(headerNoise));
    const body = t.method === "GET" || t.method === "HEAD" ? undefined : pick(bodyPool);
    const framing = body ? pick(["length", "chunked"] as const) : undefined;
    const method = rand() < 0.05 ? "BREW" : t.method;
    add({ label: "random", method, target: t.target, headers, body, framing });
  }
  return cases;
}

// ---------------------------------------------------------------- invariants

function problems(c: Case, r: RawResponse): string[] {
  const out: string[] = [];
  if (r.status === 0 && !c.mayDrop) out.push(`no response (${r.error ?? "connection closed"})`);
  if (r.status >= 500) out.push(`status ${r.status}`);
  if (r.status >= 400 && r.status < 500 && c.target.startsWith("/v2/") && r.body.length > 0) {
    const p = errorBodyProblem(r);
    if (p) out.push(p);
  }
  if (c.expect && r.status !== 0 && !c.expect.status.includes(r.status)) {
    out.push(`status ${r.status}, want ${c.expect.status.join("|")}`);
  }
  if (c.expect?.codes && r.status >= 400 && r.body.length > 0) {
    const code = firstCode(r);
    if (code && !c.expect.codes.includes(code)) {
      out.push(`code ${code}, want ${c.expect.codes.join("|")}`);
    }
  }
  return out;
}

function firstCode(r: RawResponse): string | undefined {
  try {
    return JSON.parse(dec.decode(r.body))?.errors?.[0]?.code;
  } catch {
    return undefined;
  }
}

function errorBodyProblem(r: RawResponse): string | null {
  const ct = r.headers.get("content-type") ?? "";
  if (!/json/i.test(ct)) return `4xx body with Content-Type ${JSON.stringify(ct)}`;
  let v: unknown;
  try {
    v = JSON.parse(dec.decode(r.body));
  } catch {
    return "4xx body is not JSON";
  }
  const errors = (v as { errors?: unknown })?.errors;
  if (!Array.isArray(errors) || errors.length === 0) return "4xx body has no errors array";
  for (const e of errors) {
    const { code, message, detail } = e ?? {};
    if (typeof code !== "string" || !(code in SPEC_CODES)) {
      return `code ${JSON.stringify(code)} not in SPEC`;
    }
    if (!SPEC_CODES[code].includes(r.status)) return `code ${code} with status ${r.status}`;
    if (typeof message !== "string" || typeof detail !== "string") {
      return `error ${code} lacks message/detail strings`;
    }
  }
  return null;
}

// ---------------------------------------------------------------- the test

let baseUrl = "";

async function get(path: string, init?: RequestInit): Promise<Response> {
  return await fetch(`${baseUrl}${path}`, init);
}

async function newSession(ns: string): Promise<string> {
  const r = await get(`/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await r.body?.cancel();
  assert.equal(r.status, 202, `POST upload in ${ns}`);
  const loc = r.headers.get("location");
  assert.ok(loc, "upload Location");
  return new URL(loc, baseUrl).pathname.split("/").pop()!;
}

async function bytesOf(
  path: string,
  accept?: string,
): Promise<{ status: number; digest: string | null; body: Uint8Array }> {
  const r = await get(path, { headers: accept ? { accept } : {} });
  return {
    status: r.status,
    digest: r.headers.get("docker-content-digest"),
    body: new Uint8Array(await r.arrayBuffer()),
  };
}

async function jsonOf(path: string): Promise<unknown> {
  const r = await get(path);
  assert.equal(r.status, 200, `GET ${path}`);
  return await r.json();
}

async function setup(s: TestServer): Promise<Known> {
  baseUrl = s.url;
  const layerBytes = new Uint8Array(1000).map((_, i) => (i * 7 + 3) & 0xff);
  const img = await pushImage(s.url, KNOWN, "latest", { layer: layerBytes });
  const configBytes = (await bytesOf(`/v2/${KNOWN}/blobs/${img.config}`)).body;
  assert.equal(`sha256:${await sha256Hex(configBytes)}`, img.config);
  const index = {
    schemaVersion: 2,
    mediaType: OCI_INDEX,
    manifests: [{
      mediaType: OCI_MANIFEST,
      digest: img.digest,
      size: img.body.length,
      platform: { architecture: "amd64", os: "linux" },
    }],
  };
  const indexBody = json(index);
  const r = await get(`/v2/${KNOWN}/manifests/idx`, {
    method: "PUT",
    body: indexBody as BodyInit,
    headers: { "content-type": OCI_INDEX },
  });
  await r.body?.cancel();
  assert.equal(r.status, 201, "push index");
  return {
    digest: img.digest,
    body: img.body,
    config: img.config,
    configBytes,
    layer: img.layer,
    layerBytes,
    indexDigest: `sha256:${await sha256Hex(indexBody)}`,
    indexBody,
    tags: await jsonOf(`/v2/${KNOWN}/tags/list`),
    catalog: await jsonOf("/v2/_catalog"),
    absent: `sha256:${await sha256Hex(enc.encode("never pushed"))}`,
    shortBlob: `sha256:${await sha256Hex(new Uint8Array(100))}`,
  };
}

Deno.test("malformed requests never crash the server nor change the registry", async (t) => {
  const s = await startServer({ config: `[global]\nmax_manifest_size = ${MAX_MANIFEST}\n` });
  try {
    const k = await setup(s);
    const corpus = buildCorpus(k, mulberry32(SEED));
    assert.ok(corpus.length >= 300, `corpus has ${corpus.length} cases`);
    const shared = await newSession(SCRATCH);
    const foreign = await newSession(OTHER);
    for (const c of corpus) {
      c.target = c.target.replaceAll("@SHARED@", shared).replaceAll("@FOREIGN@", foreign);
      while (c.target.includes("@FRESH@")) {
        c.target = c.target.replace("@FRESH@", await newSession(SCRATCH));
      }
    }

    const results: { c: Case; r: RawResponse; extra: string | null }[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < corpus.length) {
        const c = corpus[next++];
        const r = await send(s.port, c);
        results.push({ c, r, extra: c.check ? await c.check(r, c) : null });
      }
    }));

    if (Deno.env.get("WHARF_FUZZ_DUMP")) {
      for (const { c, r } of results) {
        console.log(
          r.status,
          c.label,
          c.method,
          c.target.slice(0, 100),
          dec.decode(r.body.subarray(0, 100)),
        );
      }
    }
    const report = (filter: (p: string) => boolean) => {
      const lines: string[] = [];
      for (const { c, r, extra } of results) {
        const ps = [...problems(c, r), ...(extra ? [extra] : [])].filter(filter);
        if (ps.length === 0) continue;
        const snippet = dec.decode(r.body.subarray(0, 160)).replace(/\s+/g, " ");
        lines.push(
          `[${c.label}] ${c.method} ${c.target.slice(0, 110)} → ${r.status} ${snippet}\n    ${
            ps.join("; ")
          }`,
        );
      }
      return lines;
    };
    const fail = (lines: string[]) =>
      assert.equal(
        lines.length,
        0,
        `${lines.length} violation(s):\n${lines.slice(0, 60).join("\n")}`,
      );

    await t.step(`no 5xx, no hang, no dropped connection (${corpus.length} requests)`, () => {
      fail(report((p) => /^status 5|^no response/.test(p)));
    });
    await t.step("every 4xx body under /v2/ is an OCI error with a SPEC code", () => {
      fail(report((p) => /^4xx|not in SPEC|with status|lacks/.test(p)));
    });
    await t.step("SPEC expectations for specific inputs", () => {
      fail(report((p) => !/^status 5|^no response|^4xx|not in SPEC|with status \d|lacks/.test(p)));
    });
    await t.step("the known image, index, tags and catalog are intact", async () => {
      const m = await bytesOf(`/v2/${KNOWN}/manifests/latest`, OCI_MANIFEST);
      assert.equal(m.status, 200);
      assert.equal(m.digest, k.digest);
      assert.deepEqual(m.body, k.body);
      const byDigest = await bytesOf(`/v2/${KNOWN}/manifests/${k.digest}`, OCI_MANIFEST);
      assert.equal(byDigest.status, 200);
      assert.deepEqual(byDigest.body, k.body);
      const idx = await bytesOf(`/v2/${KNOWN}/manifests/idx`, OCI_INDEX);
      assert.equal(idx.status, 200);
      assert.equal(idx.digest, k.indexDigest);
      assert.deepEqual(idx.body, k.indexBody);
      for (const [d, want] of [[k.config, k.configBytes], [k.layer, k.layerBytes]] as const) {
        const b = await bytesOf(`/v2/${KNOWN}/blobs/${d}`);
        assert.equal(b.status, 200, `GET blob ${d}`);
        assert.deepEqual(b.body, want);
        assert.equal(`sha256:${await sha256Hex(b.body)}`, d);
      }
      assert.deepEqual(await jsonOf(`/v2/${KNOWN}/tags/list`), k.tags);
      assert.deepEqual(await jsonOf("/v2/_catalog"), k.catalog);
      // the cut-short monolithic push stored nothing
      const short = await get(`/v2/${SCRATCH}/blobs/${k.shortBlob}`);
      assert.equal(short.status, 404);
      assert.equal(
        ((await short.json()) as { errors: { code: string }[] }).errors[0].code,
        "BLOB_UNKNOWN",
      );
      // requests naming OTHER's session from SCRATCH neither completed nor cancelled it
      const f = await get(`/v2/${OTHER}/blobs/uploads/${foreign}`);
      await f.body?.cancel();
      assert.equal(f.status, 204, "foreign session still alive");
      const v = await get("/v2/");
      await v.body?.cancel();
      assert.equal(v.status, 200);
    });
  } finally {
    await s.stop();
    await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  }
});
