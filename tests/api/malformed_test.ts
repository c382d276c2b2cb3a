// Generated bad input against every route. Requests go over raw TCP because fetch normalises
// `..`, refuses bad Content-Length values and cannot send a body shorter than its length.
// Invariants: nothing answers 5xx or hangs, every 4xx body under /v2/ is an OCI error body whose
// code matches its status (SPEC §Errors), a set of SPEC rules hold for specific inputs, and the
// content pushed beforehand is intact afterwards.
import assert from "node:assert/strict";
import {
  imageIndex,
  jsonBytes,
  OCI_CONFIG,
  OCI_INDEX,
  OCI_LAYER,
  OCI_MANIFEST,
} from "../helpers/oci_content.ts";
import { chunkBody, type RawRequest, type RawResponse, sendRaw } from "../helpers/raw_http.ts";
import { pushImage, sha256Hex, startServer, type TestServer } from "../helpers/server.ts";

const SEED = 0x0c1_5eed;
const KNOWN = "library/known";
const SCRATCH = "fuzz/scratch";
const OTHER = "fuzz/other";
const MAX_MANIFEST = 64 * 1024;
const TIMEOUT_MS = 15_000;
const CONCURRENCY = 6;

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

interface Case extends RawRequest {
  label: string;
  /** raw request-target; `@FRESH@` becomes a new session's uuid in SCRATCH, `@SHARED@` a session
   * many cases share, `@FOREIGN@` a live session of OTHER */
  target: string;
  /** the connection may end without a response (the body never completed) */
  mayDrop?: boolean;
  expect?: Expect;
  /** extra check after the response; returns a problem or null */
  check?: (r: RawResponse, c: Case) => Promise<string | null>;
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

function buildCorpus(k: Known, rand: () => number): Case[] {
  const cases: Case[] = [];
  const add = (label: string, method: string, target: string, expect?: Expect, x?: Partial<Case>) =>
    cases.push({ label, method, target, expect, ...x });
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rand() * a.length)];
  const layerHex = k.layer.slice("sha256:".length);
  const withManifest: Partial<Case> = { body: k.body, headers: [["Content-Type", OCI_MANIFEST]] };
  const chunk4 = (cr: string): Partial<Case> => ({
    body: enc.encode("abcd"),
    headers: [["Content-Range", cr], ["Content-Type", "application/octet-stream"]],
  });
  const fresh = `/v2/${SCRATCH}/blobs/uploads/@FRESH@`;

  // Names that are one run of path segments but break the grammar: NAME_INVALID or NAME_UNKNOWN.
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
  const nameExpect = err([400, 404], "NAME_INVALID", "NAME_UNKNOWN");
  for (const n of badNames) {
    for (const path of ["tags/list", "manifests/latest", `blobs/${k.layer}`]) {
      add("name", "GET", `/v2/${n}/${path}`, nameExpect);
      add("name", "HEAD", `/v2/${n}/${path}`, nameExpect);
    }
    add("name", "GET", `/v2/${n}/referrers/${k.digest}`, nameExpect);
    add("name", "POST", `/v2/${n}/blobs/uploads/`, nameExpect);
    add("name", "DELETE", `/v2/${n}/manifests/latest`, nameExpect);
    add("name", "DELETE", `/v2/${n}/blobs/${k.config}`, nameExpect);
    add("name", "PUT", `/v2/${n}/manifests/fuzz`, nameExpect, withManifest);
  }
  // Names that break the path structure: any 4xx will do, but only reads, so a server (or
  // runtime) that normalises them cannot damage the known image.
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
  for (const n of structNames) {
    for (const path of ["tags/list", "manifests/latest", `blobs/${k.layer}`]) {
      add("name-structure", "GET", `/v2/${n}/${path}`);
    }
    add("name-structure", "HEAD", `/v2/${n}/manifests/latest`);
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
  const digestInvalid = err([400], "DIGEST_INVALID");
  for (const d of badDigests) {
    const q = encodeURIComponent(d);
    add("digest", "GET", `/v2/${KNOWN}/blobs/${d}`, digestInvalid);
    add("digest", "HEAD", `/v2/${KNOWN}/blobs/${d}`, digestInvalid);
    add("digest", "DELETE", `/v2/${KNOWN}/blobs/${d}`, digestInvalid);
    add("digest", "GET", `/v2/${KNOWN}/referrers/${d}`, digestInvalid);
    add("digest", "PUT", `${fresh}?digest=${q}`, digestInvalid, { framing: "length" });
    add("digest", "POST", `/v2/${SCRATCH}/blobs/uploads/?digest=${q}`, digestInvalid, {
      body: enc.encode("x"),
    });
    add("digest", "POST", `/v2/${SCRATCH}/blobs/uploads/?mount=${q}`, oneOf(400));
    add("digest", "POST", `/v2/${SCRATCH}/blobs/uploads/?mount=${q}&from=${KNOWN}`, oneOf(400));
    for (const method of ["GET", "HEAD", "DELETE"]) {
      add("digest", method, `/v2/${KNOWN}/manifests/${d}`, oneOf(400, 404));
    }
    add("digest", "PUT", `/v2/${KNOWN}/manifests/${d}`, oneOf(400), withManifest);
  }
  // a manifest pushed under a digest it does not hash to
  add("digest", "PUT", `/v2/${KNOWN}/manifests/${k.absent}`, digestInvalid, withManifest);

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
    for (const method of ["GET", "HEAD", "DELETE"]) add("tag", method, m, oneOf(400, 404));
    add("tag", "PUT", m, oneOf(400), withManifest);
    // SPEC §Manifests rule 7: a `tag` parameter that is not a valid tag is a 400
    add(
      "tag-param",
      "PUT",
      `/v2/${KNOWN}/manifests/${k.digest}?tag=${t}`,
      oneOf(400),
      withManifest,
    );
  }

  // Upload ids that are not sessions of the addressed namespace.
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
    add("upload-id", "GET", u, expect);
    add("upload-id", "PATCH", u, expect, chunk4("0-3"));
    add("upload-id", "PUT", `${u}?digest=${k.absent}`, expect, { framing: "length" });
    add("upload-id", "DELETE", u, expect);
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
    ["bytes=\u00ff", oneOf(200)],
    ["bytes=-0", err([416], "SIZE_INVALID")],
    ["bytes=1000-", err([416], "SIZE_INVALID")],
    ["bytes=5000-6000", err([416], "SIZE_INVALID")],
    ["bytes=99999999999999999999-", oneOf(200, 416)],
    ["bytes=5-99999999999999999999", oneOf(200, 206)],
    ["bytes=-99999999999999999999", oneOf(200, 206)],
  ];
  for (const [range, expect] of ranges) {
    const target = `/v2/${KNOWN}/blobs/${k.layer}`;
    add("range", "GET", target, expect, { headers: [["Range", range]] });
    add("range", "HEAD", target, undefined, { headers: [["Range", range]] });
  }

  // PATCH Content-Range (SPEC §Blob upload, PATCH rules 1-2): a 4-byte chunk on a new session.
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
    add("content-range", "PATCH", fresh, expect, chunk4(cr));
  }
  // a refused chunk commits nothing: the session still reports an empty window
  add("content-range", "PATCH", fresh, oneOf(416), {
    ...chunk4("bytes=0-3"),
    check: async (_r, c) => {
      const s = await fetch(`${baseUrl}${c.target}`);
      await s.body?.cancel();
      if (s.status === 404) return null; // the 416 may also have cancelled the session
      return s.headers.get("range") === "0-0" ? null : `after 416, Range ${s.headers.get("range")}`;
    },
  });

  // Content-Length values the runtime or the server must refuse (PATCH rule 4), sent verbatim.
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
  const rawBody = (body: Uint8Array, headers: [string, string][]): Partial<Case> => ({
    body,
    headers,
    framing: "raw",
    halfClose: true,
    mayDrop: true,
  });
  for (const [values, expect] of badLengths) {
    const lengths = values.map((v): [string, string] => ["Content-Length", v]);
    add("content-length", "PATCH", fresh, expect, {
      ...rawBody(enc.encode("abcd"), [...lengths, ["Content-Range", "0-3"]]),
      mayDrop: expect === undefined,
    });
    add("content-length", "PUT", `/v2/${KNOWN}/manifests/fuzz`, undefined, {
      ...rawBody(enc.encode("{}"), [...lengths, ["Content-Type", OCI_MANIFEST]]),
    });
  }
  add("content-length", "PATCH", fresh, undefined, {
    ...rawBody(chunkBody(enc.encode("abcd")), [
      ["Content-Length", "4"],
      ["Transfer-Encoding", "chunked"],
    ]),
    halfClose: false,
  });
  add("content-length", "PATCH", fresh, undefined, {
    ...rawBody(enc.encode("abcd"), [["Content-Length", "2"]]),
    halfClose: false,
  });
  // A body shorter than its Content-Length commits what arrived (PATCH rule 5).
  add("short-body", "PATCH", fresh, oneOf(202), {
    ...rawBody(enc.encode("0123456789"), [["Content-Length", "100"], ["Content-Range", "0-99"]]),
    check: async (r, c) => {
      if (r.status === 202) {
        return r.headers.get("range") === "0-9"
          ? null
          : `Range ${r.headers.get("range")}, want 0-9`;
      }
      // the transport lost the answer; the session must still hold the 10 bytes
      const s = await fetch(`${baseUrl}${c.target}`);
      await s.body?.cancel();
      const range = s.headers.get("range");
      return range === "0-9" ? null : `short body: no answer, then ${s.status} Range ${range}`;
    },
  });
  // A monolithic push cut short stores nothing (checked once all cases ran).
  add("short-body", "POST", `/v2/${SCRATCH}/blobs/uploads/?digest=${k.shortBlob}`, undefined, {
    ...rawBody(new Uint8Array(10), [["Content-Length", "100"]]),
  });
  add("short-body", "PUT", `/v2/${KNOWN}/manifests/fuzz`, undefined, {
    ...rawBody(k.body.subarray(0, 50), [
      ["Content-Length", String(k.body.length)],
      ["Content-Type", OCI_MANIFEST],
    ]),
  });

  // Query values.
  for (const base of [`/v2/${KNOWN}/tags/list`, "/v2/_catalog"]) {
    add("query", "GET", `${base}?n=-1`, err([400], "UNSUPPORTED"));
    add("query", "GET", `${base}?n=abc`, err([400], "UNSUPPORTED"));
    const loose = ["n=1e9", "n=", "n=0", "n=99999999999999999999", "n=1.5", "n=%00", "n=1&n=2"];
    loose.push("last=%00", "last=%FF", "last=..%2F..", `last=${"z".repeat(300)}`, "last=%C3%BC");
    loose.push("last=", "n=1&last=%2F%2F", "n=1&last=%zz");
    for (const q of loose) add("query", "GET", `${base}?${q}`);
  }
  for (const q of ["ns=%00", "ns=Garbage", `ns=${"x".repeat(300)}`]) {
    add("query", "GET", `/v2/${KNOWN}/manifests/latest?${q}`, oneOf(200));
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
    ["digest=garbage", digestInvalid],
    [`digest=${k.absent}&digest-algorithm=sha512`, undefined],
    ["mount=&from=", undefined],
  ];
  for (const [q, expect] of posts) {
    add("post-query", "POST", `/v2/${SCRATCH}/blobs/uploads/?${q}`, expect);
  }

  // Manifest bodies, all pushed as tag `fuzz` of the known namespace: each must be refused.
  const invalid = err([400], "MANIFEST_INVALID");
  const invalidOrDigest = err([400], "MANIFEST_INVALID", "DIGEST_INVALID");
  const m = (patch: Record<string, unknown>) => jsonBytes(manifestOf(k, patch));
  const config = (digest: string, size: unknown) => ({ mediaType: OCI_CONFIG, digest, size });
  const layers = (mediaType: string, digest: string) => [{ mediaType, digest, size: 1000 }];
  const deep = "[".repeat(30_000) + "]".repeat(30_000);
  const utf16 = new Uint16Array([...'{"a":1}'].map((ch) => ch.charCodeAt(0)));
  const bodies: [string, Uint8Array, string, Expect][] = [
    ["not json", enc.encode("not json"), OCI_MANIFEST, invalid],
    ["empty", new Uint8Array(0), OCI_MANIFEST, invalid],
    ["array", enc.encode("[]"), OCI_MANIFEST, invalid],
    ["null", enc.encode("null"), OCI_MANIFEST, invalid],
    ["number", enc.encode("42"), OCI_MANIFEST, invalid],
    ["string", enc.encode('"manifest"'), OCI_MANIFEST, invalid],
    ["truncated", enc.encode('{"schemaVersion":2,'), OCI_MANIFEST, invalid],
    ["utf-16", new Uint8Array(utf16.buffer), OCI_MANIFEST, invalid],
    ["schemaVersion 1", m({ schemaVersion: 1 }), OCI_MANIFEST, invalid],
    ["schemaVersion string", m({ schemaVersion: "2" }), OCI_MANIFEST, invalid],
    ["no schemaVersion", m({ schemaVersion: undefined }), OCI_MANIFEST, invalid],
    ["config bad digest", m({ config: config("sha256:abc", 1) }), OCI_MANIFEST, invalidOrDigest],
    ["config negative size", m({ config: config(k.config, -1) }), OCI_MANIFEST, invalid],
    ["config string size", m({ config: config(k.config, "12") }), OCI_MANIFEST, invalid],
    ["config fractional size", m({ config: config(k.config, 1.5) }), OCI_MANIFEST, invalid],
    ["no config", m({ config: undefined }), OCI_MANIFEST, invalid],
    ["layers object", m({ layers: {} }), OCI_MANIFEST, invalid],
    [
      "layer uppercase digest",
      m({ layers: layers(OCI_LAYER, k.layer.toUpperCase()) }),
      OCI_MANIFEST,
      invalidOrDigest,
    ],
    ["layer bad mediaType", m({ layers: layers("not a type", k.layer) }), OCI_MANIFEST, invalid],
    [
      "subject bad digest",
      m({ subject: { mediaType: OCI_MANIFEST, digest: "sha256:zz", size: 1 } }),
      OCI_MANIFEST,
      invalidOrDigest,
    ],
    [
      "config deeply nested",
      enc.encode(`{"schemaVersion":2,"config":${deep},"layers":[]}`),
      OCI_MANIFEST,
      invalid,
    ],
    [
      "index manifests not array",
      jsonBytes({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: "x" }),
      OCI_INDEX,
      invalid,
    ],
    // SPEC §Manifests rule 6: Content-Type must agree with the body's mediaType.
    ["content-type index", k.body, OCI_INDEX, invalid],
    ["content-type text/plain", k.body, "text/plain", invalid],
    ["content-type weird", k.body, "application/x-weird+json; charset=utf-8", invalid],
    ["content-type garbage", k.body, "%%%", invalid],
    [
      "over max_manifest_size",
      m({ annotations: { pad: "x".repeat(MAX_MANIFEST + 1024) } }),
      OCI_MANIFEST,
      err([413], "MANIFEST_INVALID"),
    ],
  ];
  for (const [what, body, ct, expect] of bodies) {
    add(`manifest ${what}`, "PUT", `/v2/${KNOWN}/manifests/fuzz`, expect, {
      body,
      headers: [["Content-Type", ct]],
    });
  }
  add(
    "manifest over max_manifest_size, chunked",
    "PUT",
    `/v2/${KNOWN}/manifests/fuzz`,
    err([413], "MANIFEST_INVALID"),
    {
      body: m({ annotations: { pad: "y".repeat(MAX_MANIFEST * 2) } }),
      framing: "chunked",
      headers: [["Content-Type", OCI_MANIFEST]],
    },
  );

  // Referrers filter (SPEC §Referrers rule 3).
  const referrers = `/v2/${KNOWN}/referrers/${k.digest}`;
  for (const at of ["notamediatype", "a/b/c", "%00", "%20/%20", `${"a".repeat(200)}/x`]) {
    add("referrers", "GET", `${referrers}?artifactType=${at}`, digestInvalid);
  }
  for (const q of ["artifactType=", "last=garbage", "n=5", "last=%00"]) {
    add("referrers", "GET", `${referrers}?${q}`);
  }

  // Weird media types in Accept on pulls of the known image and index.
  const accepts = ["garbage", "*/*;q=abc", `${OCI_INDEX};q=-1`, "application/x-weird", ",,,"];
  accepts.push("a/b;" + "x=y;".repeat(2000));
  for (const accept of accepts) {
    add("accept", "GET", `/v2/${KNOWN}/manifests/latest`, undefined, {
      headers: [["Accept", accept]],
    });
    add("accept", "HEAD", `/v2/${KNOWN}/manifests/idx`, undefined, {
      headers: [["Accept", accept]],
    });
  }

  // Health, version check, unknown paths and methods.
  add("health", "GET", "/healthz", oneOf(200));
  add("health", "GET", "/readyz", oneOf(200));
  add("version", "GET", "/v2/", oneOf(200));
  add("version", "HEAD", "/v2/", oneOf(200));
  add("version", "GET", "/v2/?ns=%00", oneOf(200));
  for (const auth of ["Basic !!!", "Bearer x.y.z", "Negotiate"]) {
    add("auth", "GET", "/v2/", undefined, { headers: [["Authorization", auth]] });
  }
  const odd = [
    "GET /healthz?x=%00",
    "POST /healthz",
    "DELETE /readyz",
    "HEAD /readyz",
    "GET /healthz/extra",
    "GET /",
    "GET /nonexistent",
    "GET /v3/",
    "GET /v2",
    "PUT /v2/",
    "DELETE /v2/",
    "POST /v2/",
    "PATCH /v2/",
    "FOO /v2/",
    "OPTIONS /v2/",
    "TRACE /v2/",
    "CONNECT /v2/",
    `PROPFIND /v2/${KNOWN}/manifests/latest`,
    "POST /v2/_catalog",
    "DELETE /v2/_catalog",
    `DELETE /v2/${KNOWN}/tags/list`,
    `PATCH /v2/${KNOWN}/manifests/latest`,
    `POST /v2/${KNOWN}/manifests/latest`,
    `POST /v2/${KNOWN}/blobs/${k.layer}`,
    `PUT /v2/${KNOWN}/blobs/${k.layer}`,
    `PATCH /v2/${KNOWN}/blobs/${k.layer}`,
    `GET /v2/${KNOWN}/blobs/uploads/`,
    `PUT /v2/${KNOWN}/blobs/uploads/`,
    `DELETE /v2/${KNOWN}/blobs/uploads/`,
    `GET /v2/${KNOWN}`,
    `GET /v2/${KNOWN}/`,
    `GET /v2/${KNOWN}/unknown`,
    `GET /v2/${KNOWN}/blobs/`,
    `GET /v2/${KNOWN}/manifests/`,
    `GET /v2/${KNOWN}/tags/`,
    `GET /v2/${KNOWN}/tags/list/extra`,
    `GET /v2/${KNOWN}/referrers/`,
    `GET /v2/${KNOWN}/_svc/`,
    "GET /v2/_svc/nope",
    "GET /v2/_catalog/extra",
    "GET /v2//",
    "GET /v2/%",
    "GET /v2/%zz/tags/list",
    "GET http://127.0.0.1/v2/",
    "OPTIONS *",
    "GET /v2/#x",
    `GET /v2/${"a/".repeat(5000)}tags/list`,
  ];
  for (const line of odd) {
    const [method, target] = line.split(" ");
    add("route", method, target);
  }

  // Seeded random combinations. With `bad` set the one slot is malformed; without, the request
  // still carries noise headers, a junk body or an unknown method, and never writes to KNOWN.
  const names = [KNOWN, SCRATCH, ...badNames, ...structNames.slice(0, 6)];
  const refs = ["latest", "idx", k.digest, ...badTags, ...badDigests];
  const digests = [k.layer, k.config, k.absent, ...badDigests];
  const slot = <T>(pool: T[], bad: boolean, good = 3) =>
    bad ? pick(pool.slice(good)) : pick(pool.slice(0, good));
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
  const templates: ((bad: boolean) => [string, string, string])[] = [
    (bad) => {
      const n = slot(names, bad, 2);
      return [pick(["GET", "HEAD", "PUT", "DELETE", "POST"]), `/v2/${n}/tags/list`, n];
    },
    (bad) => {
      const n = pick([KNOWN, SCRATCH]);
      return [pick(["GET", "HEAD", "PUT", "DELETE"]), `/v2/${n}/manifests/${slot(refs, bad)}`, n];
    },
    (bad) => {
      const n = pick([KNOWN, SCRATCH]);
      return [pick(["GET", "HEAD", "DELETE"]), `/v2/${n}/blobs/${slot(digests, bad)}`, n];
    },
    (bad) => {
      const key = pick(["digest", "mount", "digest-algorithm", "from"]);
      const v = bad ? slot(digests, true) : "x%00";
      return ["POST", `/v2/${SCRATCH}/blobs/uploads/?${key}=${v}`, SCRATCH];
    },
    (bad) => {
      const id = bad ? pick(uploadIds)[0] : "@SHARED@";
      const target = `/v2/${SCRATCH}/blobs/uploads/${id}?digest=${pick(digests)}`;
      return [pick(["GET", "PATCH", "PUT", "DELETE"]), target, SCRATCH];
    },
    (bad) => {
      const n = pick([KNOWN, SCRATCH]);
      return ["GET", `/v2/${n}/referrers/${slot(digests, bad)}?artifactType=%25%25`, n];
    },
  ];
  for (let i = 0; i < 150; i++) {
    const bad = rand() < 0.8;
    const [method, target, ns] = pick(templates)(bad);
    if (!bad && ns === KNOWN && method !== "GET" && method !== "HEAD") continue;
    const headers: [string, string][] = [];
    for (let h = Math.floor(rand() * 3); h > 0; h--) headers.push(pick(headerNoise));
    const body = method === "GET" || method === "HEAD" ? undefined : pick(bodyPool);
    const framing = body ? pick(["length", "chunked"] as const) : undefined;
    add("random", rand() < 0.05 ? "BREW" : method, target, undefined, { headers, body, framing });
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
  const indexBody = imageIndex([{
    mediaType: OCI_MANIFEST,
    digest: img.digest,
    size: img.body.length,
    platform: { architecture: "amd64", os: "linux" },
  }]);
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
        const r = await sendRaw(s.port, c, TIMEOUT_MS);
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
