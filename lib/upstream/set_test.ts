import assert from "node:assert/strict";
import {
  FakeRegistry,
  randomBytes,
  refusingUrl,
  upstreamConfig,
} from "../../tests/helpers/fake_registry.ts";
import { UpstreamError, UpstreamSetError } from "./errors.ts";
import { UpstreamSet } from "./set.ts";

interface Fixture extends AsyncDisposable {
  a: FakeRegistry;
  b: FakeRegistry;
}

async function two(): Promise<Fixture> {
  const a = await FakeRegistry.start();
  const b = await FakeRegistry.start();
  return {
    a,
    b,
    async [Symbol.asyncDispose]() {
      await a.close();
      await b.close();
    },
  };
}

function setOf(urls: string[]): UpstreamSet & Disposable {
  const s = new UpstreamSet("hub", urls.map((u) => upstreamConfig(u)));
  return Object.assign(s, { [Symbol.dispose]: () => s.close() });
}

function setError(e: unknown): UpstreamSetError {
  assert.ok(e instanceof UpstreamSetError, String(e));
  assert.ok(e instanceof UpstreamError, "callers switch on UpstreamError alone");
  return e;
}

Deno.test("UpstreamSet: in order, past one down and one without the content", async () => {
  await using f = await two();
  const data = randomBytes(100);
  const d = f.b.addBlob("x", data);
  using set = setOf([refusingUrl(), f.a.url, f.b.url]);
  assert.deepEqual(await set.headBlob("hub/x", d), { size: 100 });
  const r = await set.getBlob("hub/x", d, "bytes=0-9");
  assert.equal(r.status, 206);
  assert.equal((await new Response(r.body).arrayBuffer()).byteLength, 10);
  assert.equal(f.a.count("HEAD", "/v2/x/blobs/"), 1);
  assert.equal(f.b.count("HEAD", "/v2/x/blobs/"), 1);

  // the first upstream that has it answers; later ones are not asked
  f.a.addBlob("x", data);
  f.b.resetLog();
  assert.deepEqual(await set.headBlob("hub/x", d), { size: 100 });
  assert.equal(f.b.requests.length, 0);
});

Deno.test("UpstreamSet: each upstream maps the namespace its own way", async () => {
  await using f = await two();
  const d = f.b.addBlob("org/team/x/y", randomBytes(5));
  using set = setOf([f.a.url, `${f.b.url}/org/team`]);
  assert.deepEqual(await set.headBlob("hub/x/y", d), { size: 5 });
  assert.equal(f.a.seen("HEAD", "/blobs/")[0].path, `/v2/x/y/blobs/${d}`);
  assert.equal(f.b.seen("HEAD", "/blobs/")[0].path, `/v2/org/team/x/y/blobs/${d}`);

  await assert.rejects(set.headBlob("hub", d), (e: unknown) => {
    assert.equal(setError(e).kind, "not-found");
    assert.match((e as Error).message, /hub has no upstream name/);
    return true;
  });
  assert.equal(f.a.requests.length + f.b.requests.length, 2, "nothing asked for the bare repo");
});

Deno.test("UpstreamSet: a denial, mismatch or malformed answer stops the walk", async () => {
  await using f = await two();
  const d = f.b.addBlob("x", randomBytes(5));
  f.a.addBlob("x", randomBytes(5), d);
  using set = setOf([f.a.url, f.b.url]);
  f.a.fault({ path: "/blobs/", times: 1 }, { status: 403 });
  await assert.rejects(set.headBlob("hub/x", d), (e: unknown) => {
    const s = setError(e);
    assert.equal(s.kind, "denied");
    assert.equal(s.down, false);
    assert.equal(s.errors.length, 1);
    assert.equal(s.status, 403);
    return true;
  });
  assert.equal(f.b.requests.length, 0, "another upstream would only hide the denial");

  const m = f.b.addManifest("x", { schemaVersion: 2, mediaType: "a/b" }, { tags: ["t"] });
  f.a.addManifest("x", { schemaVersion: 2, mediaType: "a/c" }, { digest: m });
  await assert.rejects(set.getManifest("hub/x", m, null, 1000), (e: unknown) => {
    assert.equal(setError(e).kind, "digest-mismatch");
    assert.equal(setError(e).retryable, false);
    return true;
  });
  assert.equal(f.b.count("GET", "/manifests/"), 0);
});

Deno.test("UpstreamSet: all down is down, naming every upstream's failure", async () => {
  await using f = await two();
  const gone = refusingUrl();
  const d = `sha256:${"b".repeat(64)}`;
  f.a.fault({ path: "/blobs/" }, { status: 503, headers: { "retry-after": "9" } });
  f.b.fault({ path: "/blobs/" }, { status: 429, headers: { "retry-after": "4" } });
  using set = setOf([gone, f.a.url, f.b.url]);
  await assert.rejects(set.getBlob("hub/x", d), (e: unknown) => {
    const s = setError(e);
    assert.equal(s.down, true);
    assert.equal(s.retryable, true);
    assert.equal(s.kind, "unavailable");
    assert.equal(s.retryAfterSecs, 4);
    assert.deepEqual(s.errors.map((x) => x.kind), ["unreachable", "unavailable", "unavailable"]);
    assert.equal(s.upstream, [gone, f.a.url, f.b.url].join(", "));
    assert.match(s.message, /^upstreams of repository hub: /);
    assert.ok(s.message.includes(`upstream ${gone}: GET blob x@${d}: `), s.message);
    assert.ok(s.message.includes(`upstream ${f.a.url}: GET blob x@${d}: 503`), s.message);
    assert.ok(s.message.includes(`upstream ${f.b.url}: GET blob x@${d}: 429`), s.message);
    return true;
  });
});

Deno.test("UpstreamSet: not found on one and down on another is not down", async () => {
  await using f = await two();
  const d = `sha256:${"c".repeat(64)}`;
  f.b.fault({ path: "/manifests/" }, { status: 500 });
  using set = setOf([f.a.url, f.b.url]);
  await assert.rejects(set.getManifest("hub/x", d, null, 1000), (e: unknown) => {
    const s = setError(e);
    assert.equal(s.kind, "not-found");
    assert.equal(s.down, false, "a cache serves stale content only when every upstream is down");
    assert.equal(s.retryable, true, "the one that was down may have it");
    return true;
  });
  f.b.clearFaults();
  await assert.rejects(set.headManifest("hub/x", d), (e: unknown) => {
    const s = setError(e);
    assert.deepEqual([s.kind, s.down, s.retryable], ["not-found", false, false]);
    return true;
  });
});

Deno.test("UpstreamSet: referrers come from the first upstream that answers", async () => {
  await using f = await two();
  const subject = `sha256:${"d".repeat(64)}`;
  f.b.addManifest("x", {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    artifactType: "a/sig",
    config: { mediaType: "a/c", digest: subject, size: 1 },
    layers: [],
    subject: { mediaType: "a/m", digest: subject, size: 1 },
  });
  f.a.fault({ path: "/referrers/" }, { status: 502 });
  using set = setOf([f.a.url, f.b.url]);
  const got = await set.getReferrers("hub/x", subject, "a/sig");
  assert.equal(got.length, 1);
  assert.equal(got[0].artifactType, "a/sig");
});

Deno.test("UpstreamSet: no upstream at all is not-found", async () => {
  using set = setOf([]);
  await assert.rejects(set.headBlob("hub/x", `sha256:${"e".repeat(64)}`), (e: unknown) => {
    const s = setError(e);
    assert.deepEqual([s.kind, s.down], ["not-found", false]);
    assert.match(s.message, /no upstream configured/);
    return true;
  });
});
