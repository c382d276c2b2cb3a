// Pull-through against real upstreams on loopback: Debian's docker-registry behind htpasswd
// Basic auth, and a second Wharf behind its token service (the Bearer dance), each holding the
// make-images.sh content. skopeo pulls through Wharf byte for byte; the cache serves while the
// upstream is down and names the failure for what it never cached; containerd pulls through a
// hosts.toml mirror that sends `?ns=docker.io`; podman through a registries.conf mirror.
import assert from "node:assert/strict";
import { join } from "node:path";
import { req } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import {
  buildImages,
  type Images,
  layoutDigests,
  missingTools,
  readBlob,
  skopeo,
  skopeoOk,
} from "./_skopeo.ts";
import { distributionMissing, freePort, startDistribution } from "./_distribution.ts";
import { containerdMissing, startContainerd } from "./_containerd.ts";
import { ALICE, startAliceOnlyServer } from "./_token_server.ts";
import { makePodman, podmanMissing } from "./_podman.ts";

const skipReason = missingTools() ?? distributionMissing();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };
const PULLER = { username: "puller", password: "puller-pw-123" };

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function hubConfig(upstream: string, creds?: { username: string; password: string }): string {
  return `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 500

[repository."hub"]
namespace = "docker.io"

[[repository."hub".upstream]]
url = "${upstream}"
connect_timeout_secs = 2
read_timeout_secs = 10
${creds ? `username = "${creds.username}"\npassword = "${creds.password}"` : ""}
`;
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-e2e-pt-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Every blob pulled is byte-identical to the source layout's, and the image is all there. */
async function assertPulledFrom(pulled: string, source: string, image: string): Promise<void> {
  const got = await layoutDigests(pulled);
  assert.ok(got.includes(image), `${image} not pulled`);
  for (const d of got) {
    assert.deepEqual(await readBlob(pulled, d), await readBlob(source, d), d);
  }
}

/** `skopeo inspect --raw` digest of a reference (sha256 of the raw manifest bytes). */
async function rawDigest(ref: string, extra: string[] = []): Promise<string> {
  const r = await skopeoOk(["inspect", "--raw", "--tls-verify=false", ...extra, ref]);
  const bytes = new TextEncoder().encode(r.stdout);
  const h = await crypto.subtle.digest("SHA-256", bytes);
  return "sha256:" + Array.from(new Uint8Array(h), (b) => b.toString(16).padStart(2, "0")).join("");
}

function pullTo(s: TestServer, ref: string, dir: string, tag: string) {
  return skopeoOk([
    "copy",
    "--src-tls-verify=false",
    "--preserve-digests",
    `docker://127.0.0.1:${s.port}/${ref}`,
    `oci:${dir}:${tag}`,
  ], s);
}

Deno.test({
  ...base,
  name: "pull-through e2e: docker-registry behind htpasswd; outage serves the cache, names misses",
  fn: async () => {
    const i = img();
    const dataDir = await Deno.makeTempDir({ prefix: "wharf-e2e-up-" });
    const port = freePort();
    let up = await startDistribution({ htpasswd: PULLER, dataDir, port });
    try {
      const creds = `${PULLER.username}:${PULLER.password}`;
      for (const [ref, tag] of [["v1", "v1"], ["multi", "multi"]]) {
        await skopeoOk([
          "copy",
          "--all",
          "--dest-tls-verify=false",
          "--dest-creds",
          creds,
          `oci:${i.layout}:${ref}`,
          `docker://${up.host}/library/app:${tag}`,
        ]);
      }
      const upV1 = await rawDigest(`docker://${up.host}/library/app:v1`, ["--creds", creds]);
      await withServer({ config: hubConfig(up.url, PULLER) }, async (s) => {
        await withDir(async (dir) => {
          await pullTo(s, "hub/library/app:v1", dir, "v1");
          assert.equal(await rawDigest(`docker://127.0.0.1:${s.port}/hub/library/app:v1`), upV1);
          await assertPulledFrom(dir, i.layout, i.v1.digest);
        });
        // The upstream goes away: what was pulled still pulls (stale beats down) ...
        await up.stop();
        await withDir(async (dir) => {
          await pullTo(s, "hub/library/app:v1", dir, "v1");
          await assertPulledFrom(dir, i.layout, i.v1.digest);
        });
        // ... what never was fails with an error naming the upstream, not a bare 404.
        const miss = await req(s, "/v2/hub/library/app/manifests/multi");
        assert.ok(miss.status === 502 || miss.status === 503, `status ${miss.status}`);
        const body = await miss.json();
        assert.ok(body.errors?.[0]?.message, JSON.stringify(body));
        const r = await skopeo([
          "inspect",
          "--raw",
          "--tls-verify=false",
          `docker://127.0.0.1:${s.port}/hub/library/app:multi`,
        ]);
        assert.notEqual(r.code, 0);
        // Upstream back on the same data: revalidation and misses resume.
        up = await startDistribution({ htpasswd: PULLER, dataDir, port });
        await withDir(async (dir) => {
          await skopeoOk([
            "copy",
            "--all",
            "--src-tls-verify=false",
            "--preserve-digests",
            `docker://127.0.0.1:${s.port}/hub/library/app:multi`,
            `oci:${dir}:multi`,
          ], s);
          assert.equal(
            await rawDigest(`docker://127.0.0.1:${s.port}/hub/library/app:multi`),
            i.multi.digest,
          );
        });
      });
    } finally {
      await up.stop().catch(() => {});
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  ...base,
  name: "pull-through e2e: a Wharf behind its token service as upstream (Bearer dance)",
  fn: async () => {
    const i = img();
    const upstream = await startAliceOnlyServer();
    try {
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        "--dest-creds",
        `${ALICE.username}:${ALICE.password}`,
        `oci:${i.layout}:v1`,
        `docker://127.0.0.1:${upstream.port}/library/app:v1`,
      ], upstream);
      await withServer({ config: hubConfig(upstream.url, ALICE) }, async (s) => {
        await withDir(async (dir) => {
          await pullTo(s, "hub/library/app:v1", dir, "v1");
          await assertPulledFrom(dir, i.layout, i.v1.digest);
        });
        assert.equal(
          await rawDigest(`docker://127.0.0.1:${s.port}/hub/library/app:v1`),
          i.v1.digest,
        );
      });
      // Without credentials the upstream refuses: the client hears why.
      await withServer({ config: hubConfig(upstream.url) }, async (s) => {
        const r = await req(s, "/v2/hub/library/app/manifests/v1");
        assert.ok(r.status >= 400 && r.status < 600 && r.status !== 500, `status ${r.status}`);
        assert.ok((await r.json()).errors?.length);
      });
    } finally {
      await upstream.stop();
    }
  },
});

Deno.test({
  ...base,
  ignore: base.ignore || containerdMissing() !== null,
  name: "pull-through e2e: containerd through a hosts.toml mirror (?ns=docker.io)",
  fn: async () => {
    const i = img();
    const up = await startDistribution();
    const ctd = await startContainerd();
    try {
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        `oci:${i.layout}:v1`,
        `docker://${up.host}/library/app:v1`,
      ]);
      await withServer({ config: hubConfig(up.url) }, async (s) => {
        const hosts = join(ctd.dir, "certs.d");
        await Deno.mkdir(join(hosts, "docker.io"), { recursive: true });
        // The default server is unreachable from here: only the mirror can answer.
        await Deno.writeTextFile(
          join(hosts, "docker.io", "hosts.toml"),
          `server = "https://registry-1.docker.io"

[host."http://127.0.0.1:${s.port}"]
  capabilities = ["pull", "resolve"]
`,
        );
        const r = await ctd.ctr("e2e", [
          "images",
          "pull",
          "--hosts-dir",
          hosts,
          "docker.io/library/app:v1",
        ], 120_000);
        assert.equal(r.code, 0, `${r.stderr}\n--- wharf ---\n${s.output().slice(-2000)}`);
        const ls = await ctd.ctr("e2e", ["images", "ls"]);
        assert.match(ls.stdout, /docker\.io\/library\/app:v1\s+\S+\s+sha256:/);
        assert.ok(ls.stdout.includes(i.v1.digest), ls.stdout);
        // Wharf answered with the namespace it served.
        const m = await req(s, "/v2/library/app/manifests/v1?ns=docker.io", {
          headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
        });
        assert.equal(m.status, 200);
        assert.equal(m.headers.get("oci-namespace"), "docker.io");
        await m.body?.cancel();
      });
    } finally {
      await ctd.stop();
      await up.stop();
    }
  },
});

Deno.test({
  ...base,
  ignore: base.ignore || podmanMissing() !== null,
  name: "pull-through e2e: podman through a registries.conf mirror of docker.io",
  fn: async () => {
    const i = img();
    const up = await startDistribution();
    const podman = await makePodman();
    try {
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        `oci:${i.layout}:v1`,
        `docker://${up.host}/library/app:v1`,
      ]);
      await withServer({ config: hubConfig(up.url) }, async (s) => {
        // docker.io itself is unreachable from here: only the mirror can answer.
        await Deno.writeTextFile(
          join(podman.dir, "registries.conf"),
          `unqualified-search-registries = []

[[registry]]
prefix = "docker.io"
location = "docker.io"

[[registry.mirror]]
location = "127.0.0.1:${s.port}/hub"
insecure = true
`,
        );
        const r = await podman.run(["pull", "docker.io/library/app:v1"], 120_000);
        assert.equal(r.code, 0, `${r.stderr}\n--- wharf ---\n${s.output().slice(-2000)}`);
        const inspect = await podman.run([
          "image",
          "inspect",
          "--format",
          "{{.Digest}}",
          "docker.io/library/app:v1",
        ]);
        assert.equal(inspect.code, 0, inspect.stderr);
        assert.equal(inspect.stdout.trim(), i.v1.digest);
        // the pull went through the cache: the tag is now cached in hub/
        const tags = await (await req(s, "/v2/hub/library/app/tags/list")).json();
        assert.deepEqual(tags.tags, ["v1"]);
      });
    } finally {
      await podman.cleanup();
      await up.stop();
    }
  },
});
