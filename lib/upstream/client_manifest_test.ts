import assert from "node:assert/strict";
import { sha256Of, sha512Of } from "../../tests/helpers/fake_registry.ts";
import {
  DOCKER_MANIFEST,
  imageIndex,
  imageManifest,
  OCI_CONFIG,
  OCI_INDEX,
  OCI_MANIFEST,
  unique,
} from "../../tests/helpers/oci_content.ts";
import { startUpstream, upstreamError as isKind } from "../../tests/helpers/upstream_client.ts";
import { DEFAULT_MANIFEST_ACCEPT } from "./accept.ts";
import { UpstreamError } from "./errors.ts";

function manifest(label = "m"): Uint8Array {
  const cfg = unique(label);
  return imageManifest({ mediaType: OCI_CONFIG, digest: sha256Of(cfg), size: cfg.length }, []);
}

Deno.test("getManifest by tag: the bytes as served, bare Content-Type, sha256 digest", async () => {
  await using t = await startUpstream();
  const body = manifest();
  const digest = t.reg.addManifest("library/alpine", body, { tags: ["3"] });
  const m = await t.client.getManifest("library/alpine", "3", null, 1 << 20);
  assert.deepEqual(m.bytes, body);
  assert.equal(m.mediaType, OCI_MANIFEST, "charset parameter stripped");
  assert.equal(m.digest, digest);
  assert.equal(t.reg.count("GET", "/v2/library/alpine/manifests/3"), 1);
});

Deno.test("getManifest forwards the client's Accept in q order, or every manifest type", async () => {
  await using t = await startUpstream();
  t.reg.addManifest("x", manifest(), { tags: ["v1"] });
  await t.client.getManifest("x", "v1", `${OCI_MANIFEST};q=0.5, ${OCI_INDEX}`, 1 << 20);
  await t.client.getManifest("x", "v1", undefined, 1 << 20);
  await t.client.headManifest("x", "v1", `${DOCKER_MANIFEST}`);
  const seen = t.reg.seen(null, "/manifests/").map((r) => r.accept);
  assert.deepEqual(seen, [
    `${OCI_INDEX}, ${OCI_MANIFEST};q=0.5`,
    DEFAULT_MANIFEST_ACCEPT.join(", "),
    DOCKER_MANIFEST,
  ]);
});

Deno.test("getManifest by digest: sha256 and sha512 references are verified", async () => {
  await using t = await startUpstream();
  const body = manifest();
  const d256 = t.reg.addManifest("x", body);
  const d512 = t.reg.addManifest("x", body, { digest: sha512Of(body) });
  assert.equal((await t.client.getManifest("x", d256, null, 1 << 20)).digest, d256);
  assert.equal((await t.client.getManifest("x", d512, null, 1 << 20)).digest, d512);

  // the upstream serves other bytes under a digest: never handed out
  const lie = sha256Of(new TextEncoder().encode("not this"));
  t.reg.addManifest("x", manifest("other"), { digest: lie });
  await assert.rejects(
    t.client.getManifest("x", lie, null, 1 << 20),
    isKind(
      "digest-mismatch",
      new RegExp(`digest mismatch: ${lie} expected, bytes hash to sha256:`),
    ),
  );
  const e = await t.client.getManifest("x", lie, null, 1 << 20).catch((e) => e);
  assert.equal(e.retryable, false);
  assert.equal(e.down, false);
});

Deno.test("getManifest by tag checks Docker-Content-Digest under its own algorithm", async () => {
  await using t = await startUpstream();
  const body = manifest();
  const digest = t.reg.addManifest("x", body, { tags: ["v1"] });

  t.reg.options.manifestDigestHeader = "sha512";
  const m = await t.client.getManifest("x", "v1", null, 1 << 20);
  assert.equal(m.digest, digest, "the tag's digest is sha256 whatever the header's algorithm");

  t.reg.options.manifestDigestHeader = "omit";
  assert.equal((await t.client.getManifest("x", "v1", null, 1 << 20)).digest, digest);

  t.reg.options.manifestDigestHeader = "wrong";
  await assert.rejects(
    t.client.getManifest("x", "v1", null, 1 << 20),
    isKind("digest-mismatch", /GET manifest x:v1: digest mismatch/),
  );
  t.reg.options.manifestDigestHeader = "malformed";
  await assert.rejects(
    t.client.getManifest("x", "v1", null, 1 << 20),
    isKind("invalid", /malformed Docker-Content-Digest/),
  );
});

Deno.test("getManifest: bodies over maxBytes are refused, declared or not", async () => {
  await using t = await startUpstream();
  const body = manifest();
  t.reg.addManifest("x", body, { tags: ["v1"] });
  await assert.rejects(
    t.client.getManifest("x", "v1", null, body.length - 1),
    isKind("invalid", new RegExp(`body of ${body.length} bytes exceeds the limit`)),
  );
  t.reg.fault({ path: "/manifests/" }, { omitLength: true });
  await assert.rejects(
    t.client.getManifest("x", "v1", null, body.length - 1),
    isKind("invalid", /body of more than \d+ bytes exceeds the limit/),
  );
  const m = await t.client.getManifest("x", "v1", null, body.length);
  assert.deepEqual(m.bytes, body, "chunked, exactly at the limit");
});

Deno.test("getManifest: a truncated body or a wrong Content-Length is an error", async () => {
  await using t = await startUpstream();
  const body = manifest();
  const digest = t.reg.addManifest("x", body, { tags: ["v1"] });

  t.reg.fault({ path: "/manifests/", times: 1 }, { truncateAfter: 10 });
  await assert.rejects(t.client.getManifest("x", "v1", null, 1 << 20), (e: unknown) => {
    isKind("invalid", new RegExp(`body cut off after 10 of ${body.length} bytes`))(e);
    assert.equal((e as UpstreamError).retryable, true, "a connection cut mid-body is transient");
    return true;
  });
  t.reg.fault({ path: "/manifests/", times: 1 }, { contentLength: body.length + 5 });
  await assert.rejects(
    t.client.getManifest("x", "v1", null, 1 << 20),
    isKind("invalid", new RegExp(`after ${body.length} of ${body.length + 5} bytes`)),
  );
  // a Content-Length short of the body cuts it: the bytes no longer hash to the digest
  t.reg.fault({ path: "/manifests/", times: 1 }, { contentLength: body.length - 1 });
  await assert.rejects(t.client.getManifest("x", digest, null, 1 << 20), isKind("digest-mismatch"));
  t.reg.fault({ path: "/manifests/", times: 1 }, { contentLength: body.length - 1 });
  await assert.rejects(t.client.getManifest("x", "v1", null, 1 << 20), isKind("digest-mismatch"));
});

Deno.test("getManifest: without Content-Type the body's mediaType is the type", async () => {
  await using t = await startUpstream({ manifestContentType: "omit" });
  const index = imageIndex([]);
  t.reg.addManifest("x", index, { tags: ["i"] });
  assert.equal((await t.client.getManifest("x", "i", null, 1 << 20)).mediaType, OCI_INDEX);
  t.reg.addManifest("x", new TextEncoder().encode("{}"), { tags: ["bare"], mediaType: "x/y" });
  await assert.rejects(
    t.client.getManifest("x", "bare", null, 1 << 20),
    isKind("invalid", /neither Content-Type nor a mediaType/),
  );
});

Deno.test("headManifest: digest, type and size from the headers, verified for digests", async () => {
  await using t = await startUpstream();
  const body = manifest();
  const digest = t.reg.addManifest("x", body, { tags: ["v1"] });
  const want = { digest, mediaType: OCI_MANIFEST, size: body.length };
  assert.deepEqual(await t.client.headManifest("x", "v1"), want);
  assert.deepEqual(await t.client.headManifest("x", digest), want);
  assert.equal(t.reg.count("GET", "/manifests/"), 0, "HEAD only");

  // an upstream naming other content for a digest reference
  const other = t.reg.addManifest("x", manifest("o"));
  t.reg.options.manifestDigestHeader = "wrong";
  await assert.rejects(t.client.headManifest("x", other), isKind("digest-mismatch"));
  t.reg.options.manifestDigestHeader = "malformed";
  await assert.rejects(t.client.headManifest("x", "v1"), isKind("invalid"));
  await assert.rejects(t.client.headManifest("x", "nope"), isKind("not-found"));
});

Deno.test("headManifest: a HEAD without a sha256 digest is completed by a verified GET", async () => {
  await using t = await startUpstream({ manifestDigestHeader: "omit" });
  const body = manifest();
  const digest = t.reg.addManifest("x", body, { tags: ["v1"] });
  const want = { digest, mediaType: OCI_MANIFEST, size: body.length };
  assert.deepEqual(await t.client.headManifest("x", "v1"), want);
  assert.equal(t.reg.count("GET", "/manifests/v1"), 1);
  t.reg.options.manifestDigestHeader = "sha512";
  assert.deepEqual(await t.client.headManifest("x", "v1"), want);
  assert.equal(t.reg.count("GET", "/manifests/v1"), 2);
  t.reg.options.manifestDigestHeader = "omit";
  assert.deepEqual(await t.client.headManifest("x", digest), want, "a digest needs no GET");
  assert.equal(t.reg.count("GET", "/manifests/"), 2);
});

Deno.test("manifests: 404 is not-found; bad names and references never leave", async () => {
  await using t = await startUpstream();
  await assert.rejects(t.client.getManifest("x", "v1", null, 1 << 20), (e: unknown) => {
    isKind("not-found", /GET manifest x:v1: 404/)(e);
    const u = e as UpstreamError;
    assert.equal(u.status, 404);
    assert.equal(u.down, false);
    assert.equal(u.retryable, false);
    assert.ok(u.message.startsWith(`upstream ${t.reg.url}: `), u.message);
    return true;
  });
  await assert.rejects(t.client.headManifest("x", "v1"), isKind("not-found"));
  await assert.rejects(t.client.getManifest("X/../y", "v1", null, 10), isKind("invalid"));
  await assert.rejects(t.client.getManifest("x", "../v1", null, 10), isKind("invalid"));
  await assert.rejects(t.client.headManifest("x", "sha256:abc"), isKind("invalid"));
  assert.equal(t.reg.requests.length, 2);
});
