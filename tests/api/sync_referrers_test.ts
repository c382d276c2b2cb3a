// Scheduled pull sync against the test upstream that has the referrers API (docker-registry 2.8
// has none): a tag's referrers (a signature) come along with `include_referrers` (default) and
// stay behind without it; a blob GET answered 429 with Retry-After is waited out and retried.
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { FakeRegistry, sha256Of } from "../helpers/fake_registry.ts";
import { runCli, startServer, type TestServer } from "../helpers/server.ts";
import { MANIFEST_ACCEPT, UpstreamProxy } from "../e2e/_sync_upstream.ts";

const enc = new TextEncoder();
const NAME = "team/app";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

interface Content {
  image: { digest: string; body: Uint8Array };
  signature: { digest: string; body: Uint8Array };
  imageBlobs: Map<string, Uint8Array>;
  signatureBlobs: Map<string, Uint8Array>;
}

function manifest(config: [string, Uint8Array], layers: [string, Uint8Array][], extra = {}) {
  return enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: config[0], digest: sha256Of(config[1]), size: config[1].length },
    layers: layers.map(([mediaType, b]) => ({ mediaType, digest: sha256Of(b), size: b.length })),
    ...extra,
  }));
}

function populate(reg: FakeRegistry): Content {
  const config = enc.encode(JSON.stringify({ os: "linux", architecture: "amd64" }));
  const layer = enc.encode(`layer ${crypto.randomUUID()}`);
  const imageBlobs = new Map([[sha256Of(config), config], [sha256Of(layer), layer]]);
  const body = manifest(["application/vnd.oci.image.config.v1+json", config], [
    ["application/vnd.oci.image.layer.v1.tar+gzip", layer],
  ]);
  const image = { digest: reg.addManifest(NAME, body, { tags: ["1.0"] }), body };
  const empty = enc.encode("{}");
  const sig = enc.encode(`signature of ${image.digest}`);
  const signatureBlobs = new Map([[sha256Of(empty), empty], [sha256Of(sig), sig]]);
  const sigBody = manifest(["application/vnd.oci.empty.v1+json", empty], [
    ["application/vnd.dev.sigstore.bundle.v0.3+json", sig],
  ], {
    artifactType: "application/vnd.dev.sigstore.bundle.v0.3+json",
    subject: { mediaType: OCI_MANIFEST, digest: image.digest, size: body.length },
  });
  const signature = { digest: reg.addManifest(NAME, sigBody), body: sigBody };
  for (const [, b] of [...imageBlobs, ...signatureBlobs]) reg.addBlob(NAME, b);
  return { image, signature, imageBlobs, signatureBlobs };
}

/** A server without the sync entry and `main.ts sync` with it; the proxy lists the tags. */
async function setup(sync: string) {
  const reg = await FakeRegistry.start();
  const content = populate(reg);
  const proxy = new UpstreamProxy(reg.url);
  const listing = () => Response.json({ name: NAME, tags: ["1.0"] });
  proxy.override = (req, path) =>
    req.method === "GET" && path.endsWith("/tags/list") ? listing() : null;
  const s = await startServer({
    config: `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${proxy.url}"\n`,
  });
  const path = join(s.dataDir, "with-sync.toml");
  await Deno.writeTextFile(
    path,
    (await Deno.readTextFile(s.configPath)) +
      `[[repository."hub".sync]]\nnamespaces = ["${NAME}"]\n${sync}\n`,
  );
  const down = () => {
    proxy.override = () => new Response("down", { status: 502 });
  };
  return {
    reg,
    proxy,
    s,
    content,
    down,
    sync: () => runCli({ ...s, configPath: path }, "sync"),
    close: async () => {
      await s.stop();
      await proxy.close();
      await reg.close();
    },
  };
}

async function read(s: TestServer, path: string): Promise<{ status: number; bytes: Uint8Array }> {
  const r = await fetch(`${s.url}/v2/hub/${NAME}/${path}`, {
    headers: { accept: MANIFEST_ACCEPT },
  });
  return { status: r.status, bytes: new Uint8Array(await r.arrayBuffer()) };
}

Deno.test({
  name: "sync: a tag's referrers come along (include_referrers); a blob 429 is waited out",
  ...serverTestOpts,
  fn: async () => {
    const t = await setup("");
    try {
      // The first blob GET is refused for a second.
      t.reg.fault({ method: "GET", path: /\/blobs\//, times: 1 }, {
        status: 429,
        headers: { "retry-after": "1" },
      });
      const t0 = Date.now();
      const run = await t.sync();
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /: ok; fetched 1 tag\(s\), 0 unchanged, 0 pruned, 4 blob\(s\)/);
      assert.ok(Date.now() - t0 >= 1000);
      const blobGets = t.reg.seen("GET", /\/blobs\//);
      assert.equal(blobGets.length, 5, "4 blobs, one of them asked twice");
      t.down();
      assert.deepEqual((await read(t.s, "manifests/1.0")).bytes, t.content.image.body);
      const sig = await read(t.s, `manifests/${t.content.signature.digest}`);
      assert.equal(sig.status, 200);
      assert.deepEqual(sig.bytes, t.content.signature.body);
      for (const [d, b] of [...t.content.imageBlobs, ...t.content.signatureBlobs]) {
        assert.deepEqual((await read(t.s, `blobs/${d}`)).bytes, b, d);
      }
      // The referrers listing serves the cached signature while the upstream is down.
      const refs =
        await (await fetch(`${t.s.url}/v2/hub/${NAME}/referrers/${t.content.image.digest}`))
          .json();
      assert.deepEqual(refs.manifests.map((m: { digest: string }) => m.digest), [
        t.content.signature.digest,
      ]);
    } finally {
      await t.close();
    }
  },
});

Deno.test({
  name: "sync: include_referrers = false leaves the referrers upstream",
  ...serverTestOpts,
  fn: async () => {
    const t = await setup("include_referrers = false");
    try {
      const run = await t.sync();
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /: ok; fetched 1 tag\(s\), 0 unchanged, 0 pruned, 2 blob\(s\)/);
      assert.equal(t.reg.count("GET", "/referrers/"), 0);
      t.down();
      assert.notEqual((await read(t.s, `manifests/${t.content.signature.digest}`)).status, 200);
      assert.equal((await read(t.s, "manifests/1.0")).status, 200);
    } finally {
      await t.close();
    }
  },
});
