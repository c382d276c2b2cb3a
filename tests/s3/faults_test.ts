// S3 faults under a Wharf process: the endpoint stopped mid-upload and restarted (the session
// resumes where it was committed), an endpoint answering 503 SlowDown (retried with backoff;
// when it stays down the client gets 503 PROVIDER_UNAVAILABLE and nothing becomes visible), and
// one refusing the key (403). Every 503 names the store (endpoint, bucket) and the cause, /readyz
// says not_ready while the last operations failed and ready once one succeeds, /healthz stays
// 200, and nothing needs a restart. The SlowDown and 403 answers come from a TCP proxy in front
// of the real S3 server.
import assert from "node:assert/strict";
import { assertError, assertErrorCode, serverTestOpts } from "../helpers/api.ts";
import { startS3 } from "../helpers/s3_server.ts";
import { s3Toml, sha256Hex, startServer, type TestServer } from "../helpers/server.ts";

function blob(n: number, seed: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * seed + (i >> 13)) & 0xff);
}

async function readyz(s: TestServer): Promise<{ status: number; error?: string }> {
  const r = await fetch(`${s.url}/readyz`);
  const body = await r.json();
  return { status: r.status, error: body.error };
}

/** `the blob store (S3 http://127.0.0.1:<port> bucket wharf) is <state>: <op>: ...; retry later` */
function storeNamed(state: string, port: number): RegExp {
  return new RegExp(
    `^the blob store \\(S3 http://127\\.0\\.0\\.1:${port} bucket wharf\\) ${state}.*; retry later$`,
  );
}

async function patch(url: string, loc: string, data: Uint8Array, start: number) {
  return await fetch(new URL(loc, url), {
    method: "PATCH",
    body: data as BodyInit,
    headers: {
      "content-type": "application/octet-stream",
      "content-range": `${start}-${start + data.length - 1}`,
    },
  });
}

Deno.test({
  name:
    "s3 faults: endpoint stopped mid-upload → 503 PROVIDER_UNAVAILABLE; restarted → the session resumes",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const s = await startServer({ blobStore: s3Toml(s3.endpoint, "faults") });
    try {
      const data = blob((13 << 20) + 5, 11);
      const cut = 6 << 20;
      const post = await fetch(`${s.url}/v2/f/up/blobs/uploads/`, { method: "POST" });
      await post.body?.cancel();
      const loc = post.headers.get("location")!;
      const p1 = await patch(s.url, loc, data.subarray(0, cut), 0);
      await p1.body?.cancel();
      assert.equal(p1.status, 202);
      await s3.stop();
      const t0 = Date.now();
      const p2 = await patch(s.url, loc, data.subarray(cut), cut);
      const e2 = await assertErrorCode(p2, 503, "PROVIDER_UNAVAILABLE");
      assert.match(
        String(e2.detail),
        storeNamed("is unreachable: [A-Z]+ faults/uploads/.*[Cc]onnection refused", s3.port),
      );
      assert.ok(Number(p2.headers.get("retry-after")) > 0);
      assert.ok(Date.now() - t0 < 30_000, "the outage is reported, not hung on");
      // The instance says it cannot take writes (from the failed operations, no probe).
      const down = await readyz(s);
      assert.equal(down.status, 503);
      assert.match(down.error!, /the blob store \(S3 .* bucket wharf\) is unreachable/);
      assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
      // The committed offset did not move.
      const st = await fetch(new URL(loc, s.url));
      await st.body?.cancel();
      assert.equal(st.headers.get("range"), `0-${cut - 1}`);
      const digest = `sha256:${await sha256Hex(data)}`;
      // Completing while S3 is down fails cleanly too, and leaves the session usable.
      const put0 = await fetch(new URL(`${loc}?digest=${digest}`, s.url), {
        method: "PUT",
        body: data.subarray(cut) as BodyInit,
      });
      await assertError(put0, 503, "PROVIDER_UNAVAILABLE");
      await s3.restart();
      const p3 = await patch(s.url, loc, data.subarray(cut), cut);
      await p3.body?.cancel();
      assert.equal(p3.status, 202);
      assert.equal((await readyz(s)).status, 200, "ready again with the first success");
      const put = await fetch(new URL(`${loc}?digest=${digest}`, s.url), { method: "PUT" });
      await put.body?.cancel();
      assert.equal(put.status, 201);
      const got = await fetch(`${s.url}/v2/f/up/blobs/${digest}`);
      assert.equal(got.status, 200);
      assert.deepEqual(new Uint8Array(await got.arrayBuffer()), data);
    } finally {
      await s.stop();
      await s3.close();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

/**
 * A TCP proxy that passes bytes through, or answers each new connection with 503 SlowDown (or
 * with 403 AccessDenied: a revoked key).
 */
function faultProxy(target: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const state = { failNext: 0, failAll: false, deny: false, refused: 0 };
  const open = new Set<Deno.Conn>();
  const slowDown = new TextEncoder().encode(
    "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: 73\r\nConnection: close\r\n\r\n" +
      "<Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>    ",
  );
  const denied = new TextEncoder().encode(
    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: 78\r\nConnection: close\r\n\r\n" +
      "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>      ",
  );
  (async () => {
    for await (const conn of listener) {
      if (state.failAll || state.failNext > 0 || state.deny) {
        if (state.failNext > 0) state.failNext--;
        state.refused++;
        const answer = state.deny ? denied : slowDown;
        (async () => {
          // read the request head, then refuse it
          const buf = new Uint8Array(65536);
          await conn.read(buf).catch(() => null);
          await conn.write(answer).catch(() => {});
          conn.close();
        })();
        continue;
      }
      open.add(conn);
      (async () => {
        let up: Deno.Conn | null = null;
        try {
          up = await Deno.connect({ hostname: "127.0.0.1", port: target });
          await Promise.all([
            conn.readable.pipeTo(up.writable).catch(() => {}),
            up.readable.pipeTo(conn.writable).catch(() => {}),
          ]);
        } catch {
          /* either side went away */
        } finally {
          open.delete(conn);
          try {
            up?.close();
          } catch { /* closed */ }
        }
      })();
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    state,
    /** drops every pooled connection, so the next requests open new ones */
    reset() {
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      open.clear();
    },
    close() {
      listener.close();
      this.reset();
    },
  };
}

Deno.test({
  name: "s3 faults: 503 SlowDown is retried with backoff; when it persists the push fails cleanly",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const proxy = faultProxy(s3.port);
    const s = await startServer({
      blobStore: s3Toml(`http://127.0.0.1:${proxy.port}`, "slowdown"),
    });
    try {
      const a = blob(200_000, 3);
      const da = `sha256:${await sha256Hex(a)}`;
      proxy.reset();
      proxy.state.failNext = 2;
      const r1 = await fetch(`${s.url}/v2/f/slow/blobs/uploads/?digest=${da}`, {
        method: "POST",
        body: a as BodyInit,
      });
      await r1.body?.cancel();
      assert.equal(r1.status, 201, "two SlowDowns are retried through");
      assert.equal(proxy.state.refused, 2);
      const g1 = await fetch(`${s.url}/v2/f/slow/blobs/${da}`);
      assert.deepEqual(new Uint8Array(await g1.arrayBuffer()), a);

      const b = blob(300_000, 5);
      const db = `sha256:${await sha256Hex(b)}`;
      proxy.reset();
      proxy.state.failAll = true;
      const t0 = Date.now();
      const r2 = await fetch(`${s.url}/v2/f/slow/blobs/uploads/?digest=${db}`, {
        method: "POST",
        body: b as BodyInit,
      });
      const e2 = await assertErrorCode(r2, 503, "PROVIDER_UNAVAILABLE");
      assert.match(
        String(e2.detail),
        storeNamed("is failing: [A-Z]+ slowdown/.*: S3 answered 503", proxy.port),
      );
      assert.ok(proxy.state.refused >= 2 + 5, `retried: ${proxy.state.refused} refusals`);
      assert.ok(Date.now() - t0 < 30_000);
      proxy.state.failAll = false;
      // Nothing of it is visible, and the same push then succeeds.
      const h = await fetch(`${s.url}/v2/f/slow/blobs/${db}`, { method: "HEAD" });
      assert.equal(h.status, 404);
      const r3 = await fetch(`${s.url}/v2/f/slow/blobs/uploads/?digest=${db}`, {
        method: "POST",
        body: b as BodyInit,
      });
      await r3.body?.cancel();
      assert.equal(r3.status, 201);
      const g3 = await fetch(`${s.url}/v2/f/slow/blobs/${db}`, {
        headers: { "x-svc-no-redirect": "1" },
      });
      assert.deepEqual(new Uint8Array(await g3.arrayBuffer()), b);
    } finally {
      await s.stop();
      proxy.close();
      await s3.close();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "s3 faults: a key S3 refuses (403) answers 503 naming the store and S3's answer, not 500",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const proxy = faultProxy(s3.port);
    const s = await startServer({ blobStore: s3Toml(`http://127.0.0.1:${proxy.port}`, "deny") });
    try {
      const a = blob(100_000, 7);
      const da = `sha256:${await sha256Hex(a)}`;
      proxy.reset();
      proxy.state.deny = true;
      const r = await fetch(`${s.url}/v2/f/deny/blobs/uploads/?digest=${da}`, {
        method: "POST",
        body: a as BodyInit,
      });
      const e = await assertErrorCode(r, 503, "PROVIDER_UNAVAILABLE");
      assert.match(
        String(e.detail),
        storeNamed(
          "refused [A-Z]+ deny/.*: S3 answered 403 AccessDenied Access Denied",
          proxy.port,
        ),
      );
      assert.ok(Number(r.headers.get("retry-after")) > 0);
      // (the failed push's clean-up is refused too; neither is retried 5 times as an outage is)
      assert.ok(proxy.state.refused <= 2, `a refusal is not retried: ${proxy.state.refused}`);
      proxy.state.deny = false;
      const ok = await fetch(`${s.url}/v2/f/deny/blobs/uploads/?digest=${da}`, {
        method: "POST",
        body: a as BodyInit,
      });
      await ok.body?.cancel();
      assert.equal(ok.status, 201);
    } finally {
      await s.stop();
      proxy.close();
      await s3.close();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
