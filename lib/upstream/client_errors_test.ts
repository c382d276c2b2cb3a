import assert from "node:assert/strict";
import { makePki } from "../../tests/helpers/certs.ts";
import {
  FakeRegistry,
  randomBytes,
  refusingUrl,
  upstreamConfig,
} from "../../tests/helpers/fake_registry.ts";
import { startUpstream, upstreamError as isKind } from "../../tests/helpers/upstream_client.ts";
import { UpstreamClient } from "./client.ts";
import { parseRetryAfter, UpstreamError, type UpstreamErrorKind } from "./errors.ts";

const DOWN = { down: true, retryable: true };
const FINAL = { down: false, retryable: false };

Deno.test("a refused connection or an unknown host is unreachable", async () => {
  const url = refusingUrl();
  const c = new UpstreamClient(upstreamConfig(url));
  await assert.rejects(
    c.headBlob("x", `sha256:${"a".repeat(64)}`),
    isKind(
      "unreachable",
      new RegExp(
        `^upstream ${url}: HEAD blob x@sha256:a+: ${url}/v2/x/blobs/sha256:a+: .*refused`,
      ),
      DOWN,
    ),
  );
  const dns = new UpstreamClient(upstreamConfig("http://no-such-host.invalid"));
  await assert.rejects(
    dns.getManifest("x", "latest", null, 100),
    isKind("unreachable", /dns|lookup/i, DOWN),
  );
  c.close();
  dns.close();
});

Deno.test("TLS: an unknown CA is unreachable; ca_bundle makes it trusted", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const pki = await makePki(dir);
    const reg = await FakeRegistry.start({
      tls: {
        cert: await Deno.readTextFile(pki.serverCert),
        key: await Deno.readTextFile(pki.serverKey),
      },
    });
    const d = reg.addBlob("x", randomBytes(10));
    const untrusted = new UpstreamClient(upstreamConfig(reg.url));
    const trusted = new UpstreamClient(upstreamConfig(reg.url, { caBundle: pki.caCert }));
    try {
      assert.match(reg.url, /^https:/);
      await assert.rejects(
        untrusted.headBlob("x", d),
        isKind("unreachable", /certificate|UnknownIssuer/i, DOWN),
      );
      assert.deepEqual(await trusted.headBlob("x", d), { size: 10 });
    } finally {
      untrusted.close();
      trusted.close();
      await reg.close();
    }
    assert.throws(
      () => new UpstreamClient(upstreamConfig("https://x", { caBundle: `${dir}/missing.pem` })),
      isKind("invalid", /cannot read ca_bundle .*missing\.pem/),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("5xx and 429 are unavailable with Retry-After; 403 denied; 404 not-found", async () => {
  await using t = await startUpstream();
  const d = t.reg.addBlob("x", randomBytes(10));
  const cases: [
    number,
    Record<string, string>,
    UpstreamErrorKind,
    { down: boolean; retryable: boolean },
    RegExp,
  ][] = [
    [500, {}, "unavailable", DOWN, /HEAD blob x@sha256:\w+: 500 Internal Server Error$/],
    [502, {}, "unavailable", DOWN, /502/],
    [
      503,
      { "retry-after": "7" },
      "unavailable",
      DOWN,
      /503 Service Unavailable \(retry after 7 s\)/,
    ],
    [
      429,
      { "retry-after": "120" },
      "unavailable",
      DOWN,
      /429 Too Many Requests \(retry after 120 s\)/,
    ],
    [403, {}, "denied", FINAL, /403 Forbidden/],
    [404, {}, "not-found", FINAL, /404 Not Found/],
    [400, {}, "invalid", FINAL, /400 Bad Request/],
  ];
  for (const [status, headers, kind, flags, msg] of cases) {
    t.reg.fault({ path: "/blobs/", times: 1 }, { status, headers });
    await assert.rejects(t.client.headBlob("x", d), (e: unknown) => {
      isKind(kind, msg, flags)(e);
      assert.equal((e as UpstreamError).status, status);
      const after = headers["retry-after"];
      assert.equal((e as UpstreamError).retryAfterSecs, after ? Number(after) : undefined);
      return true;
    });
  }
  // GET answers the same way
  t.reg.fault({ path: "/blobs/", times: 1 }, { status: 503 });
  await assert.rejects(t.client.getBlob("x", d), isKind("unavailable", /GET blob/, DOWN));
});

Deno.test("parseRetryAfter: delta-seconds or an HTTP date", () => {
  const now = Date.parse("2025-01-01T00:00:00Z");
  assert.equal(parseRetryAfter(null, now), undefined);
  assert.equal(parseRetryAfter("30", now), 30);
  assert.equal(parseRetryAfter("Wed, 01 Jan 2025 00:01:00 GMT", now), 60);
  assert.equal(parseRetryAfter("Tue, 31 Dec 2024 00:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter("-1", now), undefined);
});

Deno.test("messages name the upstream and never the password or a token", async () => {
  const password = "pa55-w0rd-xyz";
  await using t = await startUpstream(
    { auth: { scheme: "bearer", username: "u", password } },
    { username: "u", password },
  );
  const d = t.reg.addBlob("x", randomBytes(10));
  await t.client.headBlob("x", d);
  const token = t.reg.seen("HEAD", "/blobs/")[1].authorization!.slice("Bearer ".length);
  const errors: UpstreamError[] = [];
  for (const status of [403, 404, 500]) {
    t.reg.fault({ path: "/blobs/", times: 1 }, { status });
    errors.push(await t.client.headBlob("x", d).catch((e) => e));
  }
  t.reg.revokeTokens();
  t.reg.options.auth = { scheme: "bearer", username: "u", password: "changed" };
  errors.push(await t.client.headBlob("x", d).catch((e) => e));
  assert.deepEqual(errors.map((e) => e.kind), ["denied", "not-found", "unavailable", "denied"]);
  for (const e of errors) {
    assert.ok(e.message.startsWith(`upstream ${t.reg.url}: `), e.message);
    assert.equal(e.upstream, t.reg.url);
    for (const secret of [password, token, btoa(`u:${password}`)]) {
      assert.ok(!e.message.includes(secret), e.message);
    }
  }
});

Deno.test("observe is told every operation's outcome and duration", async () => {
  const seen: [string, string, string][] = [];
  let secondsOk = true;
  await using t = await startUpstream({ auth: { scheme: "bearer" } }, {}, {
    observe: (url, op, outcome, seconds) => {
      seen.push([url, op, outcome]);
      secondsOk &&= seconds >= 0 && seconds < 10;
    },
  });
  const u = t.reg.url;
  const d = t.reg.addBlob("x", randomBytes(10));
  await t.client.headBlob("x", d);
  const r = await t.client.getBlob("x", d);
  await new Response(r.body).arrayBuffer();
  await t.client.getManifest("x", "nope", null, 100).catch(() => {});
  await t.client.getReferrers("x", d);
  assert.deepEqual(seen, [
    [u, "token", "ok"],
    [u, "head-blob", "ok"],
    [u, "get-blob", "ok"],
    [u, "blob-body", "ok"],
    [u, "get-manifest", "not-found"],
    [u, "get-referrers", "ok"],
  ]);
  assert.ok(secondsOk);

  await using broken = await startUpstream({}, {}, {
    observe: () => {
      throw new Error("observer bug");
    },
  });
  const d2 = broken.reg.addBlob("x", randomBytes(10));
  assert.deepEqual(
    await broken.client.headBlob("x", d2),
    { size: 10 },
    "an observer cannot break a pull",
  );
});
