// Pull-through cache against a hostile test upstream (tests/helpers/fake_registry.ts): misses
// fetch and store byte-exact, hits stay local, tags revalidate (or not, per revalidate_secs and
// immutability), an outage serves stale copies with a Warning and fails uncached ones clearly,
// ranges pass through, wrong bytes are never stored and their job dead-letters, writes are
// refused, listings and referrers reflect the upstream, and concurrent pulls of one uncached
// blob make one upstream fetch.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { FakeRegistry, generatedBlob } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { assertErrorCode, bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import {
  descOf,
  type Descriptor,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";

const FAST_JOBS = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 400
max_attempts = 3
`;

function hubConfig(up: FakeRegistry, extra = ""): string {
  return `${FAST_JOBS}
[repository."hub"]
namespace = "docker.io"
${extra}

[[repository."hub".upstream]]
url = "${up.url}"
connect_timeout_secs = 2
read_timeout_secs = 5
`;
}

interface Image {
  manifest: Uint8Array;
  digest: string;
  config: Descriptor;
  layers: { desc: Descriptor; bytes: Uint8Array }[];
}

async function addImage(
  up: FakeRegistry,
  name: string,
  tags: string[],
  layers = 2,
): Promise<Image> {
  const cfgBytes = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
  const config = await descOf(OCI_CONFIG, cfgBytes);
  up.addBlob(name, cfgBytes);
  const ls = [];
  for (let i = 0; i < layers; i++) {
    const bytes = unique(`layer ${i} `.repeat(500));
    up.addBlob(name, bytes);
    ls.push({ desc: await descOf(OCI_LAYER, bytes), bytes });
  }
  const manifest = imageManifest(config, ls.map((l) => l.desc));
  const digest = up.addManifest(name, manifest, { tags });
  return { manifest, digest, config, layers: ls };
}

const sha256 = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function jobs(s: TestServer, set: "list" | "failed", queue = "cache") {
  const r = await req(s, `/v2/_svc/jobs/${set}?queue=${queue}`);
  assert.equal(r.status, 200);
  const body = await r.json();
  return (set === "list" ? body.jobs : body.failed) as Record<string, unknown>[];
}

Deno.test(
  "pull-through: misses fetch byte-exact, hits stay local, tags revalidate",
  serverTestOpts,
  async (t) => {
    const up = await FakeRegistry.start();
    try {
      const img = await addImage(up, "library/app", ["1.0", "latest"]);
      await withServer({ config: hubConfig(up) }, async (s) => {
        await t.step("manifest by tag: fetched, stored as served, tag kept", async () => {
          const r = await req(s, "/v2/hub/library/app/manifests/latest", {
            headers: { Accept: OCI_MANIFEST },
          });
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("docker-content-digest"), img.digest);
          assert.equal(r.headers.get("content-type"), OCI_MANIFEST);
          assert.deepEqual(await bytesOf(r), img.manifest);
          const tags = await (await req(s, "/v2/hub/library/app/tags/list")).json();
          assert.deepEqual(tags.tags, ["latest"], "tag list holds the locally cached tags only");
        });
        await t.step("blobs: fetched once, byte-identical, then local", async () => {
          for (const l of img.layers) {
            const r = await req(s, `/v2/hub/library/app/blobs/${l.desc.digest}`);
            assert.equal(r.status, 200);
            assert.deepEqual(await bytesOf(r), l.bytes);
          }
          up.resetLog();
          for (const l of img.layers) {
            const r = await req(s, `/v2/hub/library/app/blobs/${l.desc.digest}`);
            assert.equal(sha256(await bytesOf(r)), l.desc.digest);
            const h = await req(s, `/v2/hub/library/app/blobs/${l.desc.digest}`, {
              method: "HEAD",
            });
            await h.body?.cancel();
            assert.equal(h.headers.get("content-length"), String(l.bytes.length));
          }
          assert.equal(up.requests.length, 0, "cached blobs never go upstream");
        });
        await t.step(
          "digest references are served from cache without asking upstream",
          async () => {
            up.resetLog();
            const r = await req(s, `/v2/hub/library/app/manifests/${img.digest}`);
            assert.deepEqual(await bytesOf(r), img.manifest);
            assert.equal(up.requests.length, 0);
          },
        );
        await t.step(
          "a cached mutable tag is revalidated with HEAD each time (revalidate_secs 0)",
          async () => {
            up.resetLog();
            for (let i = 0; i < 2; i++) {
              const r = await req(s, "/v2/hub/library/app/manifests/latest");
              assert.deepEqual(await bytesOf(r), img.manifest);
            }
            assert.equal(up.count("HEAD", "/manifests/latest"), 2);
            assert.equal(up.count("GET", "/manifests/"), 0);
          },
        );
        await t.step(
          "a tag moved upstream: the new manifest is fetched and the tag follows",
          async () => {
            const next = await addImage(up, "library/app", ["latest"], 1);
            const r = await req(s, "/v2/hub/library/app/manifests/latest");
            assert.equal(r.headers.get("docker-content-digest"), next.digest);
            assert.deepEqual(await bytesOf(r), next.manifest);
            const old = await req(s, `/v2/hub/library/app/manifests/${img.digest}`);
            assert.equal(old.status, 200, "the earlier revision stays cached");
            await old.body?.cancel();
          },
        );
        await t.step("Accept is parsed, ordered by q and forwarded", async () => {
          up.resetLog();
          const r = await req(s, "/v2/hub/library/app/manifests/1.0", {
            headers: {
              Accept:
                "application/vnd.docker.distribution.manifest.v2+json;q=0.5, application/vnd.oci.image.manifest.v1+json",
            },
          });
          await r.body?.cancel();
          const seen = up.seen("GET", "/manifests/1.0")[0];
          assert.ok(seen, "upstream GET seen");
          const order = seen.accept!.split(",").map((x) => x.trim().split(";")[0]);
          assert.deepEqual(order.slice(0, 2), [
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
          ]);
        });
        await t.step(
          "?ns=docker.io serves the declaring repository (containerd mirrors)",
          async () => {
            const r = await req(s, `/v2/library/app/manifests/${img.digest}?ns=docker.io`);
            assert.equal(r.status, 200);
            assert.deepEqual(await bytesOf(r), img.manifest);
          },
        );
        await t.step("an upstream 404 is a clear MANIFEST_UNKNOWN / BLOB_UNKNOWN", async () => {
          const e = await assertErrorCode(
            await req(s, "/v2/hub/library/app/manifests/nope"),
            404,
            "MANIFEST_UNKNOWN",
          );
          assert.match(String(e.detail), /not found upstream/);
          await assertErrorCode(
            await req(s, `/v2/hub/library/app/blobs/sha256:${"0".repeat(64)}`),
            404,
            "BLOB_UNKNOWN",
          );
        });
        await t.step("listings report the cache and its upstream", async () => {
          const body = await (await req(s, "/v2/_svc/repositories/list")).json();
          const hub = body.repositories.find((r: { name: string }) => r.name === "hub");
          assert.equal(hub.pull_through_cache, true);
          assert.deepEqual(hub.upstream_urls, [up.url]);
        });
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test("pull-through: client writes are refused with DENIED", serverTestOpts, async () => {
  const up = await FakeRegistry.start();
  try {
    const img = await addImage(up, "library/app", ["1.0"], 1);
    await withServer({ config: hubConfig(up) }, async (s) => {
      const m = await req(s, "/v2/hub/library/app/manifests/1.0");
      await m.body?.cancel();
      const writes: [string, string, BodyInit | undefined][] = [
        ["PUT", "/v2/hub/library/app/manifests/2.0", img.manifest as BodyInit],
        ["DELETE", "/v2/hub/library/app/manifests/1.0", undefined],
        ["DELETE", `/v2/hub/library/app/manifests/${img.digest}`, undefined],
        ["DELETE", `/v2/hub/library/app/blobs/${img.layers[0].desc.digest}`, undefined],
        ["POST", "/v2/hub/library/app/blobs/uploads/", undefined],
        ["POST", `/v2/hub/x/blobs/uploads/?digest=${sha256(new Uint8Array())}`, new Uint8Array()],
        [
          "POST",
          `/v2/hub/library/app/blobs/uploads/?mount=${img.config.digest}&from=hub/library/app`,
          undefined,
        ],
      ];
      for (const [method, path, body] of writes) {
        const e = await assertErrorCode(
          await req(s, path, {
            method,
            body,
            headers: { "content-type": OCI_MANIFEST },
          }),
          403,
          "DENIED",
        );
        assert.match(String(e.detail), /read-only pull-through cache/, `${method} ${path}`);
      }
      const still = await req(s, "/v2/hub/library/app/manifests/1.0");
      assert.equal(still.status, 200);
      await still.body?.cancel();
      // A hosted repository next to it still takes pushes.
      const r = await req(s, "/v2/local/app/blobs/uploads/", { method: "POST" });
      assert.equal(r.status, 202);
      await r.body?.cancel();
    });
  } finally {
    await up.close();
  }
});

Deno.test(
  "pull-through: revalidate_secs and immutable tags skip the upstream HEAD",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      await addImage(up, "library/app", ["latest", "v1"], 1);
      const config = `${FAST_JOBS}
[repository."fresh"]
revalidate_secs = 3600
[[repository."fresh".upstream]]
url = "${up.url}"

[repository."frozen"]
immutable_tags = true
immutable_tags_exclusions = ["^latest$"]
[[repository."frozen".upstream]]
url = "${up.url}"
`;
      await withServer({ config }, async (s) => {
        for (const repo of ["fresh", "frozen"]) {
          for (const tag of ["latest", "v1"]) {
            const r = await req(s, `/v2/${repo}/library/app/manifests/${tag}`);
            assert.equal(r.status, 200);
            await r.body?.cancel();
          }
        }
        up.resetLog();
        for (const repo of ["fresh", "frozen"]) {
          for (const tag of ["latest", "v1"]) {
            const r = await req(s, `/v2/${repo}/library/app/manifests/${tag}`);
            assert.equal(r.status, 200);
            await r.body?.cancel();
          }
        }
        assert.equal(up.count(null, "/fresh/"), 0);
        assert.equal(up.count("HEAD", "/manifests/v1"), 0, "immutable v1: no HEAD");
        assert.equal(up.count("HEAD", "/manifests/latest"), 1, "excluded latest is revalidated");
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "pull-through: an outage serves stale copies with a Warning; uncached content fails clearly",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = await addImage(up, "library/app", ["latest"], 1);
      await addImage(up, "library/other", ["latest"], 1);
      await withServer({ config: hubConfig(up) }, async (s) => {
        const first = await req(s, "/v2/hub/library/app/manifests/latest");
        await first.body?.cancel();
        const blob = await req(s, `/v2/hub/library/app/blobs/${img.layers[0].desc.digest}`);
        await blob.body?.cancel();
        for (const status of [503, 429, 500]) {
          up.fault({ path: /./ }, { status, headers: { "Retry-After": "7" } });
          const r = await req(s, "/v2/hub/library/app/manifests/latest");
          assert.equal(r.status, 200, `stale served on upstream ${status}`);
          assert.match(r.headers.get("warning") ?? "", /^110 /);
          assert.deepEqual(await bytesOf(r), img.manifest);
          const e = await req(s, "/v2/hub/library/other/manifests/latest");
          const err = await assertErrorCode(e, 503, "PROVIDER_UNAVAILABLE");
          assert.match(String(err.detail), new RegExp(String(status)));
          assert.equal(e.headers.get("retry-after"), "7");
          up.clearFaults();
        }
        const port = up.port;
        await up.close();
        const r = await req(s, "/v2/hub/library/app/manifests/latest");
        assert.equal(r.status, 200);
        assert.match(r.headers.get("warning") ?? "", /Stale/);
        await r.body?.cancel();
        const byDigest = await req(s, `/v2/hub/library/app/manifests/${img.digest}`);
        assert.equal(byDigest.headers.get("warning"), null, "digest pulls never ask upstream");
        await byDigest.body?.cancel();
        const b = await req(s, `/v2/hub/library/app/blobs/${img.layers[0].desc.digest}`);
        assert.equal(b.status, 200);
        await b.body?.cancel();
        const err = await assertErrorCode(
          await req(s, "/v2/hub/library/other/manifests/latest"),
          503,
          "PROVIDER_UNAVAILABLE",
        );
        assert.match(String(err.detail), new RegExp(`127\\.0\\.0\\.1:${port}`));
        assert.match(s.output(), /every upstream is down/, "stale serving is logged");
      });
    } finally {
      await up.close().catch(() => {});
    }
  },
);

Deno.test(
  "pull-through: a range over an uncached blob passes through and queues the blob",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = await addImage(up, "library/app", ["latest"], 1);
      const layer = img.layers[0];
      await withServer({ config: hubConfig(up) }, async (s) => {
        const r = await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`, {
          headers: { Range: "bytes=10-19" },
        });
        assert.equal(r.status, 206);
        assert.equal(r.headers.get("content-range"), `bytes 10-19/${layer.bytes.length}`);
        assert.deepEqual(await bytesOf(r), layer.bytes.subarray(10, 20));
        assert.equal(up.seen("GET", layer.desc.digest)[0].range, "bytes=10-19");
        // The cache job fills it in the background: then it is served locally.
        await until("the cache job to fill the blob", async () => {
          up.resetLog();
          const h = await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`, {
            headers: { Range: "bytes=0-0" },
          });
          await h.body?.cancel();
          return h.status === 206 && up.requests.length === 0;
        });
        const whole = await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`);
        assert.deepEqual(await bytesOf(whole), layer.bytes);
        // An upstream that ignores Range answers 200 with the whole blob, passed through.
        up.options.rangeSupport = false;
        const other = await addImage(up, "library/app", ["x"], 1);
        const r2 = await req(s, `/v2/hub/library/app/blobs/${other.layers[0].desc.digest}`, {
          headers: { Range: "bytes=5-9" },
        });
        assert.equal(r2.status, 200);
        assert.deepEqual(await bytesOf(r2), other.layers[0].bytes);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "pull-through: wrong bytes or a wrong manifest digest are never stored; the job dead-letters",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = await addImage(up, "library/app", ["latest"], 1);
      const layer = img.layers[0];
      await withServer({ config: hubConfig(up) }, async (s) => {
        up.fault({ method: "GET", path: layer.desc.digest }, { replaceBody: unique("poison") });
        const r = await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`);
        // Headers may already be out: the body then breaks instead of completing.
        const got = await bytesOf(r).catch(() => null);
        assert.ok(r.status !== 200 || got === null || sha256(got) !== layer.desc.digest);
        assert.notDeepEqual(got, layer.bytes);
        await until(
          "the fill job to dead-letter",
          async () =>
            (await jobs(s, "failed")).some((j) =>
              j.kind === "fill-blob" && /hash/.test(String(j.last_error))
            ),
        );
        const failed = (await jobs(s, "failed")).find((j) => j.kind === "fill-blob")!;
        assert.equal(failed.lock_key, `hub/library/app@${layer.desc.digest}`);
        assert.equal(failed.attempts, 1, "a digest mismatch is not retried");
        // Nothing was stored: with the upstream down the blob is unknown, not served.
        up.clearFaults();
        up.fault({ path: /./ }, { status: 503 });
        await assertErrorCode(
          await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`),
          503,
          "PROVIDER_UNAVAILABLE",
        );
        up.clearFaults();
        // A manifest whose bytes do not match the digest asked for.
        const liar = up.addManifest("library/liar", jsonBytes({ schemaVersion: 2, x: 1 }), {
          digest: img.digest.replace(/.$/, (c) => (c === "0" ? "1" : "0")),
          mediaType: OCI_MANIFEST,
        });
        await assertErrorCode(
          await req(s, `/v2/hub/library/liar/manifests/${liar}`),
          502,
          "PROVIDER_UNAVAILABLE",
        );
        up.options.manifestDigestHeader = "wrong";
        await assertErrorCode(
          await req(s, "/v2/hub/library/app/manifests/latest"),
          502,
          "PROVIDER_UNAVAILABLE",
        );
        up.options.manifestDigestHeader = "correct";
        up.fault({ path: /./ }, { status: 503 });
        await assertErrorCode(
          await req(s, `/v2/hub/library/liar/manifests/${liar}`),
          503,
          "PROVIDER_UNAVAILABLE",
        );
        await assertErrorCode(
          await req(s, "/v2/hub/library/app/manifests/latest"),
          503,
          "PROVIDER_UNAVAILABLE",
        );
        up.clearFaults();
        // The honest upstream again: the blob fills and verifies.
        const ok = await req(s, `/v2/hub/library/app/blobs/${layer.desc.digest}`);
        assert.deepEqual(await bytesOf(ok), layer.bytes);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "pull-through: referrers merge upstream and cached ones; a down upstream is left out",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = await addImage(up, "library/app", ["latest"], 1);
      const subject = { mediaType: OCI_MANIFEST, digest: img.digest, size: img.manifest.length };
      const refs: { digest: string; artifactType: string; body: Uint8Array }[] = [];
      for (const artifactType of ["application/vnd.example.sbom", "application/vnd.example.sig"]) {
        const cfg = jsonBytes({ nonce: crypto.randomUUID() });
        up.addBlob("library/app", cfg);
        const body = imageManifest(await descOf(OCI_CONFIG, cfg), [], { subject, artifactType });
        refs.push({ digest: up.addManifest("library/app", body), artifactType, body });
      }
      await withServer({ config: hubConfig(up) }, async (s) => {
        const list = async (q = "") => {
          const r = await req(s, `/v2/hub/library/app/referrers/${img.digest}${q}`);
          assert.equal(r.status, 200);
          return ((await r.json()).manifests as Descriptor[]).map((d) => d.digest).sort();
        };
        assert.deepEqual(await list(), refs.map((r) => r.digest).sort(), "upstream referrers");
        assert.deepEqual(await list("?artifactType=application/vnd.example.sig"), [refs[1].digest]);
        // Cache one referrer by pulling it; then the upstream goes down.
        const pulled = await req(s, `/v2/hub/library/app/manifests/${refs[0].digest}`);
        assert.deepEqual(await bytesOf(pulled), refs[0].body);
        up.fault({ path: /./ }, { status: 503 });
        assert.deepEqual(await list(), [refs[0].digest], "cached only while upstream is down");
        assert.deepEqual(await list("?artifactType=application/vnd.example.sig"), []);
        up.clearFaults();
        assert.deepEqual(await list(), refs.map((r) => r.digest).sort());
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "pull-through: 20 clients pulling one uncached 64 MiB layer make one upstream fetch",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const size = 64 * 1024 * 1024;
      const big = generatedBlob(size);
      up.addBlob("library/big", big.source, big.digest);
      // A slow upstream keeps the fill running while all 20 arrive.
      up.fault({ method: "GET", path: big.digest, times: 1 }, {
        trickleMs: 1,
        chunkBytes: 256 * 1024,
      });
      await withServer({ config: hubConfig(up) }, async (s) => {
        const pull = async () => {
          const r = await req(s, `/v2/hub/library/big/blobs/${big.digest}`);
          assert.equal(r.status, 200);
          const h = createHash("sha256");
          let n = 0;
          for await (const chunk of r.body!) {
            h.update(chunk);
            n += chunk.byteLength;
          }
          return { n, digest: `sha256:${h.digest("hex")}` };
        };
        const results = await Promise.all(Array.from({ length: 20 }, pull));
        for (const r of results) assert.deepEqual(r, { n: size, digest: big.digest });
        assert.equal(up.count("GET", `/blobs/${big.digest}`), 1, "one upstream fetch");
        // Afterwards: local, with ranges.
        up.resetLog();
        const part = await req(s, `/v2/hub/library/big/blobs/${big.digest}`, {
          headers: { Range: `bytes=${size - 10}-` },
        });
        assert.equal(part.status, 206);
        assert.equal((await bytesOf(part)).length, 10);
        assert.equal(up.requests.length, 0);
      });
    } finally {
      await up.close();
    }
  },
);
