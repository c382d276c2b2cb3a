import assert from "node:assert/strict";
import { RegistryError } from "../oci/mod.ts";
import { S3Client } from "./s3_client.ts";

Deno.test({
  name:
    "S3 that takes the connection and never answers: 503 naming the store, once, in bounded time",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    // A stopped (not killed) server: the kernel accepts, nothing answers.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const held: Deno.Conn[] = [];
    (async () => {
      for await (const c of listener) held.push(c);
    })().catch(() => {});
    const port = (listener.addr as Deno.NetAddr).port;
    const faults: string[] = [];
    const client = new S3Client({
      endpoint: `http://127.0.0.1:${port}`,
      bucket: "b",
      region: "us-east-1",
      accessKeyId: "k",
      secretKey: "s",
      pathStyle: true,
      answerTimeoutMs: 300,
    }, { ok: () => faults.push("ok"), fault: (cause) => faults.push(cause) });
    try {
      const t = Date.now();
      const e = await client.head("blobs/x").then(() => null, (e) => e);
      assert.ok(e instanceof RegistryError, String(e));
      assert.equal(e.status, 503);
      assert.equal(
        e.detail,
        `the blob store (S3 http://127.0.0.1:${port} bucket b) is unreachable: HEAD blobs/x: ` +
          "no answer within 0.3 s; retry later",
      );
      assert.ok(Date.now() - t < 2000, "a hung server is not waited on once per retry");
      assert.equal(held.length, 1, "not retried");
      assert.deepEqual(faults, ["unavailable"]);
    } finally {
      listener.close();
      for (const c of held) c.close();
    }
  },
});

Deno.test({
  name: "S3 that redirects: the request is not followed to another host",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    let elsewhere = 0;
    const other = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
      elsewhere++;
      return new Response("<Error/>", { status: 200 });
    });
    const s3 = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () =>
        new Response(null, {
          status: 307,
          headers: { location: `http://127.0.0.1:${other.addr.port}/b/blobs/x` },
        }),
    );
    const client = new S3Client({
      endpoint: `http://127.0.0.1:${s3.addr.port}`,
      bucket: "b",
      region: "us-east-1",
      accessKeyId: "k",
      secretKey: "s",
      pathStyle: true,
    });
    try {
      await client.put("blobs/x", new TextEncoder().encode("secret bytes")).then(
        () => assert.fail("a redirected PUT is not a stored object"),
        () => {},
      );
      assert.equal(elsewhere, 0, "nothing was sent to the redirect's host");
    } finally {
      await other.shutdown();
      await s3.shutdown();
    }
  },
});
