// Scale-out (DESIGN.md Scale-out, docs/scaling.md): three `main.ts serve` processes and one
// `main.ts worker` on one KV file and one S3 bucket. One upload session is started on the
// first process, patched on the second and third and completed on the first (each process
// re-hashes what the others wrote, from S3); the worker alone drains the job queues (the
// servers' concurrency is 0); scrub runs from a fifth process; every process serves every blob.
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { startS3 } from "../helpers/s3_server.ts";
import {
  roundRobin,
  runCli,
  s3Toml,
  sha256Hex,
  startServer,
  type TestServer,
} from "../helpers/server.ts";
import { storedBlobs } from "../helpers/stored_blobs.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

// Servers take no jobs: whatever gets done, the worker did.
const SERVERS_NO_JOBS = `
[global.job_queue]
poll_interval_ms = 100
[global.job_queue.concurrency]
cache = 0
replication = 0
scan = 0
index = 0
[global.scrub]
grace_secs = 0
`;
const WORKER_JOBS = `[global.job_queue.concurrency]\nindex = 2\nscan = 1\n`;

function blob(n: number, seed: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * seed + (i >> 12)) & 0xff);
}

async function startWorker(s: TestServer): Promise<{ stop(): Promise<string> }> {
  const extra = join(s.dataDir, "worker.toml");
  await Deno.writeTextFile(extra, WORKER_JOBS);
  const child = wharfCommand(["worker", "-c", s.configPath, "-c", extra], {
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
  }).spawn();
  const out = child.output();
  return {
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      const o = await out;
      return new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr);
    },
  };
}

Deno.test({
  name: "scale-out: 3 servers + 1 worker on one KV and one bucket; an upload spread over them",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const kvDir = await Deno.makeTempDir({ prefix: "wharf-scale-" });
    const common = {
      blobStore: s3Toml(s3.endpoint, "scale"),
      metadataPath: join(kvDir, "metadata.kv"),
      config: SERVERS_NO_JOBS,
    };
    const servers: TestServer[] = [];
    let worker: { stop(): Promise<string> } | null = null;
    try {
      for (let i = 0; i < 3; i++) servers.push(await startServer(common));
      const [a, b, c] = servers;
      worker = await startWorker(a);

      // One session over three processes: POST on a, PATCH on b, PATCH on c, PUT on a.
      const data = blob((17 << 20) + 333, 7);
      const cuts = [0, (5 << 20) + 1, (11 << 20) - 7, data.length];
      const post = await fetch(`${a.url}/v2/scale/up/blobs/uploads/`, { method: "POST" });
      await post.body?.cancel();
      assert.equal(post.status, 202);
      const loc = post.headers.get("location")!;
      assert.ok(loc.startsWith("/v2/"), "Location is relative: any replica resolves it");
      for (const [i, s] of [b, c].entries()) {
        const r = await fetch(new URL(loc, s.url), {
          method: "PATCH",
          body: data.subarray(cuts[i], cuts[i + 1]) as BodyInit,
          headers: { "content-range": `${cuts[i]}-${cuts[i + 1] - 1}` },
        });
        await r.body?.cancel();
        assert.equal(r.status, 202);
        assert.equal(r.headers.get("range"), `0-${cuts[i + 1] - 1}`);
      }
      // The status is the same from every process.
      for (const s of servers) {
        const st = await fetch(new URL(loc, s.url));
        await st.body?.cancel();
        assert.equal(st.headers.get("range"), `0-${cuts[2] - 1}`);
      }
      const digest = `sha256:${await sha256Hex(data)}`;
      // A wrong digest is refused on a (which re-hashes b's and c's bytes from S3)...
      const wrong = await fetch(new URL(`${loc}?digest=sha256:${"1".repeat(64)}`, a.url), {
        method: "PUT",
        body: data.subarray(cuts[2]) as BodyInit,
      });
      await wrong.body?.cancel();
      assert.equal(wrong.status, 400);
      // ... and the right one completes there, the last chunk with it.
      const put = await fetch(new URL(`${loc}?digest=${digest}`, a.url), { method: "PUT" });
      await put.body?.cancel();
      assert.equal(put.status, 201, `${put.status}`);
      for (const s of servers) {
        const g = await fetch(`${s.url}/v2/scale/up/blobs/${digest}`, {
          headers: { "x-svc-no-redirect": "1" },
        });
        assert.equal(g.status, 200);
        assert.equal(await sha256Hex(new Uint8Array(await g.arrayBuffer())), digest.slice(7));
        const r = await fetch(`${s.url}/v2/scale/up/blobs/${digest}`, { redirect: "manual" });
        await r.body?.cancel();
        assert.equal(r.status, 307);
      }

      // Jobs: a pushed image's layer is indexed by the worker (the servers take none).
      const tar = tarOf([{ path: "etc/hello.txt", data: "hi\n" }]);
      const img = await pushTarImage(b.url, "scale/img", "v1", [tar]);
      const layer = img.layers[0];
      const deadline = Date.now() + 60_000;
      let listing: Response;
      for (;;) {
        listing = await fetch(`${c.url}/v2/scale/img/_svc/layers/${layer}/entries`);
        if (listing.status !== 202) break;
        await listing.body?.cancel();
        assert.ok(Date.now() < deadline, "the worker never indexed the layer");
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(listing.status, 200);
      assert.match(await listing.text(), /etc\/hello\.txt/);

      // Scrub from another process reclaims a deleted blob from the bucket.
      const gone = blob(1000, 3);
      const gd = `sha256:${await sha256Hex(gone)}`;
      const p = await fetch(`${c.url}/v2/scale/tmp/blobs/uploads/?digest=${gd}`, {
        method: "POST",
        body: gone as BodyInit,
      });
      await p.body?.cancel();
      assert.equal(p.status, 201);
      const del = await fetch(`${b.url}/v2/scale/tmp/blobs/${gd}`, { method: "DELETE" });
      await del.body?.cancel();
      assert.equal(del.status, 202);
      const scrub = await runCli(a, "scrub");
      assert.equal(scrub.code, 0, scrub.stderr);
      assert.match(scrub.stdout, /1 blob\(s\) reclaimed \(1000 bytes\)/);
      const left: string[] = [];
      for await (const d of storedBlobs(a)) left.push(d);
      assert.ok(!left.includes(gd), "scrub removed the bytes from S3");
      assert.ok(left.includes(digest), "and kept the referenced ones");

      const log = await worker.stop();
      worker = null;
      assert.match(log, /wharf worker draining .*index/);
      assert.match(log, /blobs s3 http:\/\/127\.0\.0\.1:\d+ bucket wharf prefix scale/);
    } finally {
      await worker?.stop();
      for (const s of servers) await s.stop();
      for (const s of servers) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(kvDir, { recursive: true }).catch(() => {});
      await s3.close();
    }
  },
});

Deno.test({
  name: "scale-out: behind a proxy setting X-Forwarded-*, the realm and redirects work per replica",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const kvDir = await Deno.makeTempDir({ prefix: "wharf-scale-" });
    const common = {
      blobStore: s3Toml(s3.endpoint, "lb"),
      metadataPath: join(kvDir, "metadata.kv"),
      server: 'trusted_proxies = ["127.0.0.1"]',
      config: `[auth.token_service]
secret_key = "scale-out-secret-0123456789abcdef012345"
service = "wharf.lb"
[global.access_policy]
default = "deny"
rules = ['request.action in ["get-token", "healthz"]', 'request.action == "get-api-version" && has(identity.id)', 'request.action == "get-blob"', '!has(identity.id) && request.action in ["start-upload", "update-upload", "complete-upload", "get-upload"]']
`,
    };
    const servers: TestServer[] = [];
    let lb: ReturnType<typeof roundRobin> | null = null;
    try {
      for (let i = 0; i < 3; i++) servers.push(await startServer(common));
      lb = roundRobin(servers.map((s) => s.url));
      const h = { "x-forwarded-proto": "https", "x-forwarded-host": "registry.example.net" };
      // Every replica names the same public realm.
      for (let i = 0; i < 3; i++) {
        const r: Response = await fetch(`${lb.url}/v2/`, { headers: h });
        await r.body?.cancel();
        assert.equal(r.status, 401);
        assert.match(
          r.headers.get("www-authenticate")!,
          /^Bearer realm="https:\/\/registry\.example\.net\/token",service="wharf\.lb"/,
        );
      }
      assert.deepEqual(lb.counts, [1, 1, 1]);
      // An anonymous push and pulls (allowed by the policy above): each replica redirects.
      const data = blob(4096, 9);
      const d = `sha256:${await sha256Hex(data)}`;
      const p = await fetch(`${lb.url}/v2/lb/x/blobs/uploads/?digest=${d}`, {
        method: "POST",
        body: data as BodyInit,
      });
      await p.body?.cancel();
      assert.equal(p.status, 201);
      for (let i = 0; i < 3; i++) {
        const g: Response = await fetch(`${lb.url}/v2/lb/x/blobs/${d}`, {
          headers: h,
          redirect: "manual",
        });
        await g.body?.cancel();
        assert.equal(g.status, 307);
        const bytes = await fetch(g.headers.get("location")!);
        assert.deepEqual(new Uint8Array(await bytes.arrayBuffer()), data);
      }
    } finally {
      await lb?.close();
      for (const s of servers) await s.stop();
      for (const s of servers) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
      await Deno.remove(kvDir, { recursive: true }).catch(() => {});
      await s3.close();
    }
  },
});
