import assert from "node:assert/strict";
import { randomBytes as bytes } from "../../tests/helpers/fake_registry.ts";
import { startUpstream, upstreamError as isKind } from "../../tests/helpers/upstream_client.ts";
import { UpstreamError } from "./errors.ts";
import { verifyDigest } from "./verify.ts";

const read = async (s: ReadableStream<Uint8Array>) =>
  new Uint8Array(await new Response(s).arrayBuffer());

Deno.test("headBlob: the size; 404 is not-found", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x/y", bytes(1234));
  assert.deepEqual(await t.client.headBlob("x/y", d), { size: 1234 });
  await assert.rejects(t.client.headBlob("x/z", d), isKind("not-found", /HEAD blob x\/z@sha256/));
  await assert.rejects(t.client.headBlob("x/y", "sha256:nope"), isKind("invalid", /not a digest/));
});

Deno.test("getBlob: the whole blob streamed with its size", async () => {
  await using t = await startUpstream();
  const data = bytes(300_000);
  const d = t.reg.addBlob("x", data);
  const r = await t.client.getBlob("x", d);
  assert.equal(r.status, 200);
  assert.equal(r.size, data.length);
  assert.equal(r.contentRange, undefined);
  assert.deepEqual(await read(r.body), data);
});

Deno.test("getBlob: Range forwarded verbatim, 206 and Content-Range passed through", async () => {
  await using t = await startUpstream();
  const data = bytes(1000);
  const d = t.reg.addBlob("x", data);
  const cases: [string, string, number, number][] = [
    ["bytes=10-19", "bytes 10-19/1000", 10, 20],
    ["bytes=990-", "bytes 990-999/1000", 990, 1000],
    ["bytes=-5", "bytes 995-999/1000", 995, 1000],
    ["bytes=900-5000", "bytes 900-999/1000", 900, 1000],
  ];
  for (const [range, contentRange, from, to] of cases) {
    const r = await t.client.getBlob("x", d, range);
    assert.equal(r.status, 206, range);
    assert.equal(r.contentRange, contentRange);
    assert.equal(r.size, to - from);
    assert.deepEqual(await read(r.body), data.subarray(from, to));
  }
  assert.deepEqual(t.reg.seen("GET", "/blobs/").map((r) => r.range), cases.map((c) => c[0]));

  await assert.rejects(t.client.getBlob("x", d, "bytes=1000-"), (e: unknown) => {
    isKind("invalid", /416/)(e);
    assert.equal((e as UpstreamError).status, 416, "the caller answers 416 from this");
    return true;
  });
});

Deno.test("getBlob: an upstream ignoring Range answers 200, returned as is", async () => {
  await using t = await startUpstream({ rangeSupport: false });
  const data = bytes(1000);
  const d = t.reg.addBlob("x", data);
  const r = await t.client.getBlob("x", d, "bytes=10-19");
  assert.equal(r.status, 200);
  assert.equal(r.size, 1000);
  assert.equal(r.contentRange, undefined);
  assert.deepEqual(await read(r.body), data);
});

Deno.test("getBlob: a 206 without Content-Range is invalid", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(10));
  t.reg.fault({ path: "/blobs/" }, { status: 206, body: "0123" });
  await assert.rejects(t.client.getBlob("x", d, "bytes=0-3"), isKind("invalid", /206 without/));
});

Deno.test("getBlob: redirects followed to maxRedirects; loops and overflows are errors", async () => {
  await using t = await startUpstream({ blobRedirect: 3 }, { maxRedirects: 3 });
  const data = bytes(500);
  const d = t.reg.addBlob("x", data);
  assert.deepEqual(await read((await t.client.getBlob("x", d)).body), data);
  assert.equal(t.reg.count("GET", /^\/hop\//), 2);
  assert.equal(t.reg.count("GET", /^\/mirror\//), 1);

  t.reg.options.blobRedirect = 4;
  await assert.rejects(
    t.client.getBlob("x", d),
    isKind("invalid", /more than 3 redirects \(last to http:\/\/127\.0\.0\.1:\d+\/mirror\/x/),
  );
  t.reg.options.blobRedirect = "loop";
  await assert.rejects(
    t.client.getBlob("x", d),
    isKind("invalid", /redirect loop at http:\/\/127\.0\.0\.1:\d+\/loop\/a/),
  );
  t.reg.options.blobRedirect = "same-origin";
  await using none = await startUpstream({ blobRedirect: "same-origin" }, { maxRedirects: 0 });
  await assert.rejects(
    none.client.getBlob("x", none.reg.addBlob("x", data)),
    isKind("invalid", /more than 0 redirects/),
  );
});

Deno.test("getBlob: a redirect target's signed query never appears in errors", async () => {
  await using t = await startUpstream({ blobRedirect: "other-origin" });
  const d = t.reg.addBlob("x", bytes(10));
  t.reg.fault({ path: "/cdn/" }, { status: 503 });
  await assert.rejects(t.client.getBlob("x", d), (e: unknown) => {
    isKind("unavailable", /503/)(e);
    assert.ok(!(e as Error).message.includes("s3cr3t"), (e as Error).message);
    return true;
  });
  t.reg.clearFaults();
  t.reg.fault({ path: "/cdn/" }, { truncateAfter: 4 });
  const r = await t.client.getBlob("x", d);
  await assert.rejects(read(r.body), (e: unknown) => {
    isKind("invalid", /body cut off after 4 of 10 bytes/)(e);
    assert.ok(!(e as Error).message.includes("s3cr3t"), (e as Error).message);
    return true;
  });
});

Deno.test("getBlob: a body short of Content-Length errors the stream", async () => {
  await using t = await startUpstream();
  const data = bytes(200_000);
  const d = t.reg.addBlob("x", data);
  t.reg.fault({ path: "/blobs/", times: 1 }, { truncateAfter: 100_000 });
  const r = await t.client.getBlob("x", d);
  assert.equal(r.size, 200_000);
  await assert.rejects(read(r.body), (e: unknown) => {
    isKind("invalid", /GET blob x@sha256:\w+: body cut off after \d+ of 200000 bytes/)(e);
    assert.equal((e as UpstreamError).retryable, true);
    return true;
  });
});

Deno.test("getBlob: a stalled body errors after the read timeout", async () => {
  await using t = await startUpstream({}, { readTimeoutSecs: 0.3 });
  const d = t.reg.addBlob("x", bytes(100_000));
  t.reg.fault({ path: "/blobs/" }, { stallAfter: 1000 });
  const r = await t.client.getBlob("x", d);
  const started = performance.now();
  const reader = r.body.getReader();
  const first = await reader.read();
  assert.equal(first.value?.byteLength, 1000);
  await assert.rejects(reader.read(), (e: unknown) => {
    isKind("timeout", /body stalled for 0\.3 s after 1000 of 100000 bytes/)(e);
    assert.equal((e as UpstreamError).down, true);
    assert.equal((e as UpstreamError).retryable, true);
    return true;
  });
  const took = performance.now() - started;
  assert.ok(took >= 250 && took < 2000, `${took} ms`);
});

Deno.test("getBlob: the read timeout bounds each gap, not the whole transfer", async () => {
  await using t = await startUpstream({}, { readTimeoutSecs: 0.25 });
  const data = bytes(8 * 1024);
  const d = t.reg.addBlob("x", data);
  // 8 pieces 100 ms apart: 700 ms in all, no gap near 250 ms
  t.reg.fault({ path: "/blobs/" }, { trickleMs: 100, chunkBytes: 1024 });
  const started = performance.now();
  assert.deepEqual(await read((await t.client.getBlob("x", d)).body), data);
  assert.ok(performance.now() - started > 600);
});

Deno.test("the connect timeout bounds the wait for response headers", async () => {
  await using t = await startUpstream({}, { connectTimeoutSecs: 0.2 });
  const d = t.reg.addBlob("x", bytes(10));
  t.reg.fault({ path: "/blobs/", times: 1 }, { delayMs: 2000 });
  const started = performance.now();
  await assert.rejects(t.client.headBlob("x", d), (e: unknown) => {
    isKind("timeout", /HEAD blob x@sha256:\w+: no response within 0\.2 s/)(e);
    assert.equal((e as UpstreamError).down, true);
    return true;
  });
  assert.ok(performance.now() - started < 1500);
  assert.deepEqual(await t.client.headBlob("x", d), { size: 10 });
});

Deno.test("a consumer cancelling a blob body releases the connection", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", bytes(1 << 20));
  const r = await t.client.getBlob("x", d);
  const reader = r.body.getReader();
  await reader.read();
  await reader.cancel();
  assert.deepEqual(await t.client.headBlob("x", d), { size: 1 << 20 });
});

Deno.test("verifyDigest: passes matching bytes; on others, errors before their last chunk", async () => {
  await using t = await startUpstream();
  const data = bytes(100_000);
  const d = t.reg.addBlob("x", data);
  const ok = await t.client.getBlob("x", d);
  assert.deepEqual(await read(verifyDigest(ok.body, d, t.client.url)), data);

  const wrong = bytes(300_000);
  const lie = t.reg.addBlob("x", wrong, d.replace(/.$/, (c) => (c === "0" ? "1" : "0")));
  const bad = await t.client.getBlob("x", lie);
  const chunks: Uint8Array[] = [];
  await assert.rejects(
    (async () => {
      for await (const c of verifyDigest(bad.body, lie, t.client.url)) chunks.push(c);
    })(),
    isKind("digest-mismatch", new RegExp(`blob ${lie}: digest mismatch: 300000 bytes hash to`)),
  );
  const got = chunks.reduce((n, c) => n + c.length, 0);
  assert.ok(got < wrong.length, `the last chunk is held back: ${got} of ${wrong.length} bytes`);

  const long = await t.client.getBlob("x", d);
  await assert.rejects(
    read(verifyDigest(long.body, d, t.client.url, 99_999)),
    isKind("invalid", /more than the 99999 bytes expected/),
  );
  assert.throws(() => verifyDigest(bad.body, "md5:x", t.client.url), isKind("invalid"));
});
