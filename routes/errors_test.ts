// The one mapper (errors.ts) against SPEC §Errors: every code at its default status, every named
// factory of lib/oci at its own status and headers, the raw failures it classifies, and the rules
// that hold for all of them (the body shape, 5XX codes, no body on HEAD).
import assert from "node:assert/strict";
import { Hono } from "hono";
import { type ErrorCode, RegistryError } from "../lib/oci/mod.ts";
// The factories' module itself, not mod.ts: the cases below must name each of its exports.
import * as factories from "../lib/oci/error_factories.ts";
import { errorResponse } from "./errors.ts";

/** SPEC §Errors' status of each code (its first, where it names several). */
const SPEC_STATUS: Record<ErrorCode, number> = {
  BLOB_UNKNOWN: 404,
  BLOB_UPLOAD_INVALID: 413,
  BLOB_UPLOAD_UNKNOWN: 404,
  DIGEST_INVALID: 400,
  MANIFEST_BLOB_UNKNOWN: 404,
  MANIFEST_INVALID: 400,
  MANIFEST_UNKNOWN: 404,
  NAME_INVALID: 400,
  NAME_UNKNOWN: 404,
  SIZE_INVALID: 416,
  UNAUTHORIZED: 401,
  DENIED: 403,
  UNSUPPORTED: 400,
  REPLICATION_SUPERSEDED: 409,
  INTERNAL_ERROR: 500,
  PROVIDER_UNAVAILABLE: 503,
  RECLAMATION_IN_PROGRESS: 503,
  TOOMANYREQUESTS: 429,
};

/** SPEC §Errors rule 2: the only codes a 5XX body may carry. */
const FIVE_XX_CODES = new Set([
  "INTERNAL_ERROR",
  "PROVIDER_UNAVAILABLE",
  "RECLAMATION_IN_PROGRESS",
]);

interface Expected {
  error: RegistryError;
  code: ErrorCode;
  status: number;
  detail: string;
  /** every header the answer carries besides Content-Type */
  headers: Record<string, string>;
  /** the message, where it is not the code's own */
  message?: string;
}

const D = "sha256:" + "a".repeat(64);

/** One case per factory: a factory added without a case here does not type-check. */
const FACTORY_CASES: Record<keyof typeof factories, Expected> = {
  stillReferenced: {
    error: factories.stillReferenced("blob is referenced"),
    code: "DENIED",
    status: 405,
    detail: "blob is referenced",
    headers: {},
  },
  rejectedWrite: {
    error: factories.rejectedWrite("tag v1 is immutable"),
    code: "DENIED",
    status: 409,
    detail: "tag v1 is immutable",
    headers: {},
  },
  deniedWithReason: {
    error: factories.deniedWithReason("quota exceeded: a uses 1 B of 1 B"),
    code: "DENIED",
    status: 403,
    detail: "quota exceeded: a uses 1 B of 1 B",
    headers: {},
    message: "quota exceeded: a uses 1 B of 1 B",
  },
  manifestTooLarge: {
    error: factories.manifestTooLarge(4096),
    code: "MANIFEST_INVALID",
    status: 413,
    detail: "manifest exceeds 4096 bytes",
    headers: {},
  },
  uploadConflict: {
    error: factories.uploadConflict("upload session changed concurrently"),
    code: "BLOB_UPLOAD_INVALID",
    status: 409,
    detail: "upload session changed concurrently",
    headers: {},
  },
  notApplicable: {
    error: factories.notApplicable("x is not an image"),
    code: "UNSUPPORTED",
    status: 404,
    detail: "x is not an image",
    headers: {},
  },
  methodUnsupported: {
    error: factories.methodUnsupported("method PATCH not allowed on this path", ["GET", "HEAD"]),
    code: "UNSUPPORTED",
    status: 400,
    detail: "method PATCH not allowed on this path",
    headers: { allow: "GET, HEAD" },
  },
  methodNotAllowed: {
    error: factories.methodNotAllowed("method POST not allowed on this path", ["GET"]),
    code: "UNSUPPORTED",
    status: 405,
    detail: "method POST not allowed on this path",
    headers: { allow: "GET" },
  },
  rangeNotSatisfiable: {
    error: factories.rangeNotSatisfiable(1234),
    code: "SIZE_INVALID",
    status: 416,
    detail: "range not satisfiable",
    headers: { "content-range": "bytes */1234" },
  },
  tooManyRequests: {
    error: factories.tooManyRequests("another image diff is being computed", 1),
    code: "TOOMANYREQUESTS",
    status: 429,
    detail: "another image diff is being computed",
    headers: { "retry-after": "1" },
  },
  unavailable: {
    error: factories.unavailable("the blob store is full (ENOSPC): retry later", 30),
    code: "PROVIDER_UNAVAILABLE",
    status: 503,
    detail: "the blob store is full (ENOSPC): retry later",
    headers: { "retry-after": "30" },
  },
  upstreamFailed: {
    error: factories.upstreamFailed("upstream served a wrong digest"),
    code: "PROVIDER_UNAVAILABLE",
    status: 502,
    detail: "upstream served a wrong digest",
    headers: {},
  },
  unsettled: {
    error: factories.unsettled("signatures kept arriving: retry", 1),
    code: "INTERNAL_ERROR",
    status: 503,
    detail: "signatures kept arriving: retry",
    headers: { "retry-after": "1" },
  },
  reclaiming: {
    error: factories.reclaiming(D, 2),
    code: "RECLAMATION_IN_PROGRESS",
    status: 503,
    detail: `${D} is being reclaimed; retry shortly`,
    headers: { "retry-after": "2" },
  },
};

/** What the mapper answers to `err` thrown by a handler of `method`. */
async function answer(err: unknown, method = "GET"): Promise<Response> {
  const app = new Hono();
  app.onError((e, c) => errorResponse(e, c));
  app.all("*", () => {
    throw err;
  });
  return await app.request("http://registry.test/v2/a/manifests/latest", { method });
}

/** The answer's headers besides Content-Type, lower-cased. */
function extraHeaders(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (k !== "content-type") out[k] = v;
  });
  return out;
}

/** Asserts the OCI body `{errors:[{code,message,detail}]}` and SPEC's rule on 5XX codes. */
async function assertBody(res: Response, code: string, detail: string, message?: string) {
  assert.equal(res.headers.get("content-type"), "application/json");
  const body = await res.json();
  assert.deepEqual(Object.keys(body), ["errors"]);
  assert.equal(body.errors.length, 1);
  const [e] = body.errors;
  assert.deepEqual(Object.keys(e).sort(), ["code", "detail", "message"]);
  assert.equal(e.code, code);
  assert.equal(typeof e.message, "string");
  assert.ok(e.message.length > 0, "a message says something");
  if (message !== undefined) assert.equal(e.message, message);
  assert.equal(typeof e.detail, "string");
  assert.equal(e.detail, detail);
  if (res.status >= 500) {
    assert.ok(FIVE_XX_CODES.has(code), `${code} answered ${res.status}: SPEC allows no such 5XX`);
  }
}

Deno.test("every error code answers SPEC's status with the OCI body", async () => {
  for (const [code, status] of Object.entries(SPEC_STATUS) as [ErrorCode, number][]) {
    const res = await answer(new RegistryError(code, `detail of ${code}`));
    assert.equal(res.status, status, code);
    assert.deepEqual(extraHeaders(res), {}, code);
    await assertBody(res, code, `detail of ${code}`);
  }
});

Deno.test("every named factory answers its own status and headers", async () => {
  for (const [name, x] of Object.entries(FACTORY_CASES)) {
    assert.ok(x.error instanceof RegistryError, name);
    const res = await answer(x.error);
    assert.equal(res.status, x.status, name);
    assert.deepEqual(extraHeaders(res), x.headers, name);
    await assertBody(res, x.code, x.detail, x.message);
  }
});

Deno.test("a HEAD answer carries the status and headers and no body", async () => {
  for (const [name, x] of Object.entries(FACTORY_CASES)) {
    const res = await answer(x.error, "HEAD");
    assert.equal(res.status, x.status, name);
    assert.deepEqual(extraHeaders(res), x.headers, name);
    assert.equal(await res.text(), "", name);
  }
});

Deno.test("a raw store fault answers 503 PROVIDER_UNAVAILABLE with Retry-After", async () => {
  const full = Object.assign(new Error("No space left on device (os error 28)"), {
    code: "ENOSPC",
  });
  const res = await answer(full);
  assert.equal(res.status, 503);
  assert.deepEqual(extraHeaders(res), { "retry-after": "30" });
  await assertBody(
    res,
    "PROVIDER_UNAVAILABLE",
    "a store of this server is full (no space left on device): retry later",
  );
});

Deno.test("a raw KV fault answers 503 PROVIDER_UNAVAILABLE with Retry-After", async () => {
  const res = await answer(new TypeError("database or disk is full"));
  assert.equal(res.status, 503);
  assert.deepEqual(extraHeaders(res), { "retry-after": "30" });
  await assertBody(
    res,
    "PROVIDER_UNAVAILABLE",
    "the metadata store (KV) is full (database or disk is full): retry later",
  );
});

Deno.test("a machine failure answers 503 PROVIDER_UNAVAILABLE with Retry-After", async () => {
  const err = Object.assign(new Error("no sandbox could start"), { machine: true });
  const res = await answer(err);
  assert.equal(res.status, 503);
  assert.deepEqual(extraHeaders(res), { "retry-after": "5" });
  await assertBody(res, "PROVIDER_UNAVAILABLE", "no sandbox could start; retry later");
});

Deno.test("any other error answers 500 INTERNAL_ERROR and leaks nothing", async () => {
  for (const err of [new Error("secret at /var/lib/wharf/key"), new TypeError("secret: x")]) {
    const res = await answer(err);
    assert.equal(res.status, 500);
    assert.deepEqual(extraHeaders(res), {});
    const text = await res.clone().text();
    assert.ok(!text.includes("secret"), text);
    await assertBody(res, "INTERNAL_ERROR", "");
  }
});

// The count of status overrides at throw sites stays 0: a status other than a code's default is
// a named factory's (lib/oci/error_factories.ts), so the mapper test above covers it.
Deno.test("no throw site outside lib/oci picks a RegistryError's status", async () => {
  const root = new URL("../", import.meta.url);
  const found: string[] = [];
  for (const dir of ["lib", "routes", "commands"]) {
    for await (const path of sources(new URL(`${dir}/`, root))) {
      if (path.includes("/lib/oci/")) continue;
      const src = await Deno.readTextFile(path);
      for (const call of registryErrorCalls(src)) {
        if (/\bstatus\s*:/.test(call.text)) found.push(`${path}:${call.line}`);
      }
    }
  }
  assert.deepEqual(found, []);
});

async function* sources(dir: URL): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const url = new URL(e.name + (e.isDirectory ? "/" : ""), dir);
    if (e.isDirectory) yield* sources(url);
    else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) yield url.pathname;
  }
}

/** The argument text of each `RegistryError(` call (constructions and subclasses' `super(`). */
function* registryErrorCalls(src: string): Generator<{ line: number; text: string }> {
  const opens = [...src.matchAll(/RegistryError\(/g)].map((m) => m.index!);
  if (/extends RegistryError\b/.test(src)) {
    opens.push(...[...src.matchAll(/\bsuper\(/g)].map((m) => m.index!));
  }
  for (const start of opens) {
    let i = src.indexOf("(", start) + 1;
    for (let depth = 1; depth > 0 && i < src.length; i++) {
      if (src[i] === "(") depth++;
      else if (src[i] === ")") depth--;
    }
    yield { line: src.slice(0, start).split("\n").length, text: src.slice(start, i) };
  }
}
