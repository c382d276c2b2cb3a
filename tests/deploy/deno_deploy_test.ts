// The Deno Deploy entry (deploy/deno_deploy.ts) run locally the way Deploy constrains it: no
// write permission at all (--deny-write), KV not on disk, bytes in a real S3 server. Pushes
// stream to S3, blob GETs always redirect (X-Svc-No-Redirect ignored), and jobs are drained
// only by the Deno.cron tick (nothing polls the queues in between).
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { serverTestOpts } from "../helpers/api.ts";
import { startS3 } from "../helpers/s3_server.ts";
import { pushBlob, s3Toml, sha256Hex } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

Deno.test({
  name:
    "deno-deploy entry: --deny-write, S3 + in-memory KV, blob GETs always 307, jobs drained by Deno.cron",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--unstable-kv",
        "--unstable-cron",
        "--deny-write",
        "--allow-net",
        "--allow-read",
        "--allow-env",
        "--allow-sys",
        "--allow-ffi",
        "deploy/deno_deploy.ts",
      ],
      cwd: ROOT,
      env: {
        WHARF_CONFIG: s3Toml(s3.endpoint, "deploy"),
        WHARF_KV_PATH: ":memory:",
        PORT: "0",
        WHARF_HOSTNAME: "127.0.0.1",
        WHARF_DRAIN_SECS: "15",
        WHARF_STRICT_KV_LIMITS: "1",
        NO_COLOR: "1",
      },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let out = "";
    const pump = async (s: ReadableStream<Uint8Array>) => {
      const dec = new TextDecoder();
      for await (const c of s) out += dec.decode(c, { stream: true });
    };
    const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
    try {
      const deadline = Date.now() + 30_000;
      let m: RegExpExecArray | null = null;
      while (!(m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out))) {
        assert.ok(Date.now() < deadline, `did not start:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const url = m[1];
      // A chunked push streams to S3 (no filesystem to stage it on).
      const data = new Uint8Array(6 << 20).map((_, i) => i & 0xff);
      const digest = `sha256:${await sha256Hex(data)}`;
      const post = await fetch(`${url}/v2/dep/x/blobs/uploads/`, { method: "POST" });
      await post.body?.cancel();
      const loc = post.headers.get("location")!;
      const patch = await fetch(new URL(loc, url), { method: "PATCH", body: data as BodyInit });
      await patch.body?.cancel();
      assert.equal(patch.status, 202);
      const put = await fetch(new URL(`${loc}?digest=${digest}`, url), { method: "PUT" });
      await put.body?.cancel();
      assert.equal(put.status, 201);
      for (const h of [{}, { "x-svc-no-redirect": "1" }] as Record<string, string>[]) {
        const g = await fetch(`${url}/v2/dep/x/blobs/${digest}`, {
          headers: h,
          redirect: "manual",
        });
        await g.body?.cancel();
        assert.equal(g.status, 307, JSON.stringify(h));
      }
      const followed = await fetch(`${url}/v2/dep/x/blobs/${digest}`);
      assert.equal(await sha256Hex(new Uint8Array(await followed.arrayBuffer())), digest.slice(7));
      await pushBlob(url, "dep/x", new TextEncoder().encode("small"));

      // The layer index job waits for the cron tick (at the next minute).
      const img = await pushTarImage(url, "dep/img", "v1", [
        tarOf([{ path: "etc/deploy", data: "x" }]),
      ]);
      const entries = `${url}/v2/dep/img/_svc/layers/${img.layers[0]}/entries`;
      const first = await fetch(entries);
      await first.body?.cancel();
      assert.equal(first.status, 202, "nothing drains the queues outside the cron");
      const until = Date.now() + 90_000;
      let r: Response;
      for (;;) {
        r = await fetch(entries);
        if (r.status !== 202) break;
        await r.body?.cancel();
        assert.ok(Date.now() < until, `the cron never drained the index job:\n${out}`);
        await new Promise((res) => setTimeout(res, 500));
      }
      assert.equal(r.status, 200);
      assert.match(await r.text(), /etc\/deploy/);
      assert.doesNotMatch(out, /PermissionDenied|NotCapable/);
    } finally {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await child.status;
      await pumps;
      await s3.close();
    }
  },
});
