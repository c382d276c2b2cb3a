// Replication from Wharf to Debian's docker-registry (CNCF distribution) as the downstream:
// skopeo pushes the make-images.sh content (a multi-arch index, a single image and its SBOM
// referrer) to Wharf, and skopeo reads the same digests back from docker-registry; a tag move
// and deletes follow; a
// downstream behind htpasswd; and a Wharf killed with SIGKILL in the middle of a 256 MiB
// transfer converges after a restart (its job's lease is taken over).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { req } from "../helpers/api.ts";
import { startServer, type TestServer, withServer } from "../helpers/server.ts";
import { buildImages, type Images, missingTools, skopeo, skopeoOk } from "./_skopeo.ts";
import { distributionMissing, startDistribution } from "./_distribution.ts";

const skipReason = missingTools() ?? distributionMissing();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };
const CREDS = { username: "replicator", password: "replicator-pw-1" };

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function config(url: string, extra = ""): string {
  return `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 100
backoff_max_ms = 1000
max_attempts = 10
lease_secs = 3

[[repository."app".downstream]]
name = "dist"
url = "${url}"
connect_timeout_secs = 2
read_timeout_secs = 30
${extra}
`;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The digest docker-registry answers for `repo:ref`, or null. */
async function remoteDigest(url: string, repo: string, ref: string, auth?: string) {
  const r = await fetch(`${url}/v2/${repo}/manifests/${ref}`, {
    method: "HEAD",
    headers: {
      accept: [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
      ].join(", "),
      ...(auth ? { authorization: `Basic ${btoa(auth)}` } : {}),
    },
  });
  await r.body?.cancel();
  return r.status === 200 ? r.headers.get("docker-content-digest") : null;
}

function pushTo(s: TestServer, ref: string, dest: string) {
  return skopeoOk([
    "copy",
    "--all",
    "--preserve-digests",
    "--dest-tls-verify=false",
    `oci:${img().layout}:${ref}`,
    `docker://127.0.0.1:${s.port}/${dest}`,
  ], s);
}

Deno.test({
  ...base,
  name:
    "replication e2e: pushes, a tag move and deletes reach docker-registry, read back by skopeo",
  fn: async () => {
    const i = img();
    const dist = await startDistribution();
    try {
      await withServer({ config: config(dist.url) }, async (s) => {
        await pushTo(s, "multi", "app/site:multi");
        await pushTo(s, "v1", "app/site:v1");
        await until(
          "both tags downstream",
          async () =>
            (await remoteDigest(dist.url, "app/site", "multi")) === i.multi.digest &&
            (await remoteDigest(dist.url, "app/site", "v1")) === i.v1.digest,
        );
        // skopeo reads the same bytes from docker-registry: every child of the index too
        for (const ref of ["multi", "v1"]) {
          const local = await skopeoOk([
            "inspect",
            "--raw",
            "--tls-verify=false",
            `docker://127.0.0.1:${s.port}/app/site:${ref}`,
          ]);
          const remote = await skopeoOk([
            "inspect",
            "--raw",
            "--tls-verify=false",
            `docker://${dist.host}/app/site:${ref}`,
          ]);
          assert.equal(remote.stdout, local.stdout, ref);
        }
        const dir = await Deno.makeTempDir({ prefix: "wharf-e2e-repl-" });
        try {
          await skopeoOk([
            "copy",
            "--all",
            "--preserve-digests",
            "--src-tls-verify=false",
            `docker://${dist.host}/app/site:multi`,
            `oci:${join(dir, "l")}:multi`,
          ]);
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
        // a referrer (the SBOM artifact whose subject is v1), pushed by digest, follows its subject
        await skopeoOk([
          "copy",
          "--preserve-digests",
          "--dest-tls-verify=false",
          `oci:${i.layout}:sbom`,
          `docker://127.0.0.1:${s.port}/app/site@${i.sbom.digest}`,
        ], s);
        await until(
          "the referrer downstream",
          async () => (await remoteDigest(dist.url, "app/site", i.sbom.digest)) === i.sbom.digest,
        );
        // a tag move
        await pushTo(s, "v1", "app/site:multi");
        await until(
          "tag moved downstream",
          async () => (await remoteDigest(dist.url, "app/site", "multi")) === i.v1.digest,
        );
        // a delete by digest removes the manifest downstream
        const del = await req(s, `/v2/app/site/manifests/${i.v1.digest}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await until(
          "manifest deleted downstream",
          async () => (await remoteDigest(dist.url, "app/site", i.v1.digest)) === null,
        );
        // nothing was dead-lettered on the way
        const failed = await (await req(s, "/v2/_svc/jobs/failed?queue=replication")).json();
        assert.deepEqual(failed.failed, []);
      });
    } finally {
      await dist.stop();
    }
  },
});

Deno.test({
  ...base,
  name:
    "replication e2e: a docker-registry downstream behind htpasswd; wrong credentials dead-letter",
  fn: async () => {
    const i = img();
    const dist = await startDistribution({ htpasswd: CREDS });
    try {
      const creds = `username = "${CREDS.username}"\npassword = "${CREDS.password}"`;
      await withServer({ config: config(dist.url, creds) }, async (s) => {
        await pushTo(s, "v1", "app/auth:v1");
        await until(
          "pushed with credentials",
          async () =>
            (await remoteDigest(
              dist.url,
              "app/auth",
              "v1",
              `${CREDS.username}:${CREDS.password}`,
            )) ===
              i.v1.digest,
        );
      });
      const wrong = `username = "${CREDS.username}"\npassword = "not-it"`;
      await withServer({ config: config(dist.url, wrong) }, async (s) => {
        await pushTo(s, "v1", "app/auth:v2");
        await until("dead-lettered", async () => {
          const f = await (await req(s, "/v2/_svc/jobs/failed?queue=replication")).json();
          return f.failed.length > 0 && /401|unauthori[sz]ed/i.test(f.failed[0].last_error);
        }, 20_000);
        assert.equal(
          await remoteDigest(dist.url, "app/auth", "v2", `${CREDS.username}:${CREDS.password}`),
          null,
        );
      });
    } finally {
      await dist.stop();
    }
  },
});

Deno.test({
  ...base,
  name: "replication e2e: SIGKILL in the middle of a 256 MiB transfer, restart, converge",
  fn: async () => {
    const dist = await startDistribution();
    const first = await startServer({ config: config(dist.url) });
    const dataDir = first.dataDir;
    let second: TestServer | null = null;
    try {
      // A 256 MiB layer streamed in 8 MiB PATCHes (never held whole here either).
      const post = await req(first, "/v2/app/big/blobs/uploads/", { method: "POST" });
      await post.body?.cancel();
      let loc = new URL(post.headers.get("location")!, first.url).href;
      const hash = createHash("sha256");
      const chunk = new Uint8Array(8 * 1024 * 1024);
      let at = 0;
      for (let n = 0; n < 32; n++) {
        for (let o = 0; o < chunk.length; o += 65536) {
          crypto.getRandomValues(chunk.subarray(o, o + 65536));
        }
        hash.update(chunk);
        const r = await fetch(loc, {
          method: "PATCH",
          body: chunk,
          headers: {
            "content-type": "application/octet-stream",
            "content-range": `${at}-${at + chunk.length - 1}`,
          },
        });
        await r.body?.cancel();
        assert.equal(r.status, 202);
        loc = new URL(r.headers.get("location")!, first.url).href;
        at += chunk.length;
      }
      const layer = `sha256:${hash.digest("hex")}`;
      const close = new URL(loc);
      close.searchParams.set("digest", layer);
      const put = await fetch(close, { method: "PUT" });
      await put.body?.cancel();
      assert.equal(put.status, 201);
      const cfg = new TextEncoder().encode(`{"os":"linux","architecture":"amd64"}`);
      const cfgDigest = "sha256:" + Array.from(
        new Uint8Array(await crypto.subtle.digest("SHA-256", cfg)),
        (b) => b.toString(16).padStart(2, "0"),
      ).join("");
      const c = await fetch(`${first.url}/v2/app/big/blobs/uploads/?digest=${cfgDigest}`, {
        method: "POST",
        body: cfg,
      });
      await c.body?.cancel();
      const manifest = JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {
          mediaType: "application/vnd.oci.image.config.v1+json",
          digest: cfgDigest,
          size: cfg.length,
        },
        layers: [{
          mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
          digest: layer,
          size: at,
        }],
      });
      const m = await req(first, "/v2/app/big/manifests/v1", {
        method: "PUT",
        headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
        body: manifest,
      });
      assert.equal(m.status, 201);
      const digest = m.headers.get("docker-content-digest")!;
      // Kill once docker-registry holds an upload session for the layer: mid-transfer.
      const uploads = join(dist.dataDir, "docker/registry/v2/repositories/app/big/_uploads");
      await until("transfer under way", async () => {
        try {
          for await (const _ of Deno.readDir(uploads)) return true;
        } catch { /* not yet */ }
        return false;
      }, 30_000);
      await first.kill();
      assert.equal(await remoteDigest(dist.url, "app/big", "v1"), null, "not done before the kill");
      second = await startServer({ config: config(dist.url), dataDir });
      await until(
        "converged after restart",
        async () => (await remoteDigest(dist.url, "app/big", "v1")) === digest,
        120_000,
      );
      // the layer arrived whole
      const head = await fetch(`${dist.url}/v2/app/big/blobs/${layer}`, { method: "HEAD" });
      await head.body?.cancel();
      assert.equal(head.status, 200);
      assert.equal(head.headers.get("content-length"), String(at));
      const r = await skopeo(["inspect", "--tls-verify=false", `docker://${dist.host}/app/big:v1`]);
      assert.equal(r.code, 0, r.stderr);
    } finally {
      await first.kill().catch(() => {});
      await second?.stop();
      await dist.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
