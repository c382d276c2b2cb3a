// Issue 22 §4 for the upstream client: a redirect or a token realm from an upstream's answer
// never leads to metadata, link-local or unspecified addresses; the refusal happens before any
// connection and counts as the upstream being unreachable (a pull-through serves its cache).
import assert from "node:assert/strict";
import { randomBytes as bytes } from "../../tests/helpers/fake_registry.ts";
import { METADATA_TARGETS, startRedirector, startSink } from "../../tests/helpers/outbound.ts";
import { startUpstream, upstreamError } from "../../tests/helpers/upstream_client.ts";
import { OutboundRefused } from "../http/mod.ts";
import { UpstreamError } from "./errors.ts";
import { UpstreamClient } from "./client.ts";

const read = async (s: ReadableStream<Uint8Array>) =>
  new Uint8Array(await new Response(s).arrayBuffer());

/** Refused before any connection: the cause is the guard's, not a network error. */
function refused(cls: RegExp) {
  return (e: unknown) => {
    upstreamError("unreachable", /refused: /, { down: true, retryable: true })(e);
    const cause = (e as UpstreamError).cause;
    assert.ok(cause instanceof OutboundRefused, `cause: ${cause}`);
    assert.match(String(cause.addressClass), cls);
    return true;
  };
}

Deno.test("upstream: a blob redirect to a metadata or link-local address is refused", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(100));
  for (const target of METADATA_TARGETS) {
    t.reg.clearFaults();
    t.reg.fault({ path: "/blobs/" }, { status: 307, headers: { location: target } });
    const started = performance.now();
    await assert.rejects(t.client.getBlob("x", d), refused(/metadata|link-local/), target);
    // a connect to a non-routable address would wait for the connect timeout (30 s)
    assert.ok(performance.now() - started < 2000, target);
  }
  const e = await t.client.getBlob("x", d).catch((e) => e);
  assert.match(
    e.message,
    /GET blob x@sha256:[0-9a-f]+: redirect to http:\/\/\[fe80::1\]\/ refused: fe80::1 is a link-local address/,
  );
});

Deno.test("upstream: manifests, HEADs and later hops are vetted alike", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(100));
  t.reg.addManifest("x", new TextEncoder().encode('{"schemaVersion":2}'), {
    tags: ["v1"],
    mediaType: "application/vnd.oci.image.manifest.v1+json",
  });
  t.reg.fault({ path: "/manifests/" }, {
    status: 302,
    headers: { location: "http://[fd00:ec2::254]/" },
  });
  await assert.rejects(t.client.headManifest("x", "v1"), refused(/metadata/));
  await assert.rejects(t.client.getManifest("x", "v1", null, 1 << 20), refused(/metadata/));
  t.reg.clearFaults();
  // an ordinary first hop on the upstream, then a second one to metadata
  await using hop = startRedirector("http://2852039166/");
  t.reg.fault({ path: "/blobs/" }, { status: 307, headers: { location: `${hop.url}/cdn` } });
  await assert.rejects(t.client.getBlob("x", d), refused(/metadata/));
  await assert.rejects(t.client.headBlob("x", d), (e: unknown) => {
    // a HEAD follows redirects too (and the same hop refuses it)
    return refused(/metadata/)(e);
  });
  assert.equal(hop.seen.length, 2, "the first hop was on loopback, as the upstream is");
});

Deno.test("upstream: a refused target is never contacted; outbound_allow opens it", async () => {
  await using sink = startSink();
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(100));
  t.reg.fault({ path: "/blobs/" }, {
    status: 307,
    headers: { location: `${sink.unspecifiedUrl}/blob?X-Amz-Signature=s3cr3t` },
  });
  const e = await t.client.getBlob("x", d).catch((e) => e);
  refused(/unspecified/)(e);
  assert.doesNotMatch(e.message, /s3cr3t/);
  assert.equal(sink.seen.length, 0, "0.0.0.0 reaches the sink, but nothing was sent");

  const open = new UpstreamClient(t.reg.upstreamConfig({ outboundAllow: ["0.0.0.0/8"] }));
  try {
    const r = await open.getBlob("x", d);
    assert.deepEqual(await read(r.body), new TextEncoder().encode("{}"));
    assert.equal(sink.seen.length, 1, "allowed: the same redirect reaches it");
  } finally {
    open.close();
  }
});

Deno.test("upstream: loopback stays reachable from a loopback upstream (CDN stand-in)", async () => {
  await using sink = startSink();
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(100));
  for (const host of ["localhost", "127.0.0.1", "[::ffff:127.0.0.1]"]) {
    t.reg.clearFaults();
    t.reg.fault({ path: "/blobs/" }, {
      status: 307,
      headers: { location: `http://${host}:${sink.port}/bucket/o?X-Amz-Signature=s` },
    });
    const r = await t.client.getBlob("x", d);
    await read(r.body);
  }
  assert.equal(sink.seen.length, 3);
});

Deno.test("upstream: a token realm on a refused address is never asked", async () => {
  await using sink = startSink();
  await using t = await startUpstream({}, { username: "u", password: "p" });
  const d = t.reg.addBlob("x", bytes(100));
  for (
    const realm of [
      "http://169.254.169.254/latest/api/token",
      "http://[fd00:ec2::254]/token",
      "http://2852039166/token",
      `${sink.unspecifiedUrl}/token`,
    ]
  ) {
    t.reg.clearFaults();
    t.reg.fault({ path: "/blobs/" }, {
      status: 401,
      headers: { "www-authenticate": `Bearer realm="${realm}",service="reg"` },
    });
    const e = await t.client.getBlob("x", d).catch((e) => e);
    refused(/metadata|unspecified/)(e);
    assert.match(e.message, /token request to .* refused/, realm);
  }
  assert.equal(sink.seen.length, 0);
});

Deno.test("upstream: a token realm's redirect is vetted like any other", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer" } });
  const d = t.reg.addBlob("x", bytes(100));
  t.reg.fault({ path: "/token" }, {
    status: 307,
    headers: { location: "http://169.254.169.254/latest/meta-data/" },
  });
  const e = await t.client.getBlob("x", d).catch((e) => e);
  refused(/metadata/)(e);
  assert.match(e.message, /token request to .*: redirect to http:\/\/169\.254\.169\.254\//);
});
