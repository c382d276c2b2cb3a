import { openTestKv } from "../../tests/helpers/kv.ts";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { defaultConfig } from "../config/mod.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { K } from "../kv/mod.ts";
import { STALE_MARKER_MS } from "../metadata/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import { Registry } from "./mod.ts";
import { allWriteEffects } from "../services/mod.ts";
import { Scrubber } from "./scrub.ts";

const enc = new TextEncoder();
const sha256 = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

interface Env {
  reg: Registry;
  kv: Deno.Kv;
  store: FsBlobStore;
  dir: string;
  scrub: (opts?: { dryRun?: boolean; graceSecs?: number }) => ReturnType<Scrubber["run"]>;
}

async function withEnv(
  fn: (e: Env) => Promise<void>,
  tweak?: (c: ReturnType<typeof defaultConfig>) => void,
) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-scrub-" });
  const cfg = defaultConfig();
  cfg.blobStore.fs.rootDir = join(dir, "blobs");
  tweak?.(cfg);
  const store = new FsBlobStore(cfg.blobStore.fs.rootDir);
  await store.init();
  const t = await openTestKv(join(dir, "kv.sqlite"));
  const kv = t.kv;
  const reg = new Registry(cfg, kv, store, { effects: allWriteEffects(cfg) });
  const scrubber = new Scrubber(cfg, kv, store);
  try {
    await fn({ reg, kv, store, dir, scrub: (o) => scrubber.run({ graceSecs: 0, ...o }) });
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function body(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new Blob([bytes as Uint8Array<ArrayBuffer>]).stream();
}

async function pushBlob(reg: Registry, ns: string, bytes: Uint8Array): Promise<string> {
  const digest = sha256(bytes);
  const r = await reg.uploads.start(ns, {
    digest,
    digestAlgorithm: null,
    mount: null,
    from: null,
    canRead: () => true,
    body: body(bytes),
    contentLength: bytes.byteLength,
  });
  assert.equal(r.kind, "created");
  return digest;
}

async function pushManifest(
  reg: Registry,
  ns: string,
  tag: string,
  layers: string[],
  pad = 0,
): Promise<string> {
  const config = await pushBlob(reg, ns, enc.encode(`{"ns":"${ns}","tag":"${tag}"}`));
  const m = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: config, size: 1 },
    layers: layers.map((d) => ({
      mediaType: "application/vnd.oci.image.layer.v1.tar",
      digest: d,
      size: 1,
    })),
    annotations: pad ? { pad: "x".repeat(pad) } : undefined,
  }));
  const r = await reg.manifests.put(ns, tag, {
    body: body(m),
    contentLength: m.byteLength,
    contentType: "application/vnd.oci.image.manifest.v1+json",
    tags: [],
    sourceTimestamp: null,
  });
  return r.digest;
}

Deno.test("scrub: bytes stay while a namespace owns them and go once none does", async () => {
  await withEnv(async ({ reg, store, scrub }) => {
    const shared = await pushBlob(reg, "a/one", enc.encode("shared layer"));
    await pushBlob(reg, "a/two", enc.encode("shared layer"));
    const lone = await pushBlob(reg, "a/one", enc.encode("lonely layer"));
    let s = await scrub();
    assert.equal(s!.blobs, 0);
    assert.ok(await store.exists(shared));

    await reg.blobs.delete("a/one", shared);
    await reg.blobs.delete("a/one", lone);
    s = await scrub();
    assert.equal(s!.blobs, 1, "only the digest no namespace owns");
    assert.equal(s!.bytes, "lonely layer".length);
    assert.equal(await store.exists(lone), false);
    assert.ok(await store.exists(shared), "a/two still owns it");

    await reg.blobs.delete("a/two", shared);
    assert.equal((await scrub())!.blobs, 1);
    assert.equal(await store.exists(shared), false);
  });
});

Deno.test("scrub: the grace period keeps young unreferenced bytes; dry run changes nothing", async () => {
  await withEnv(async ({ reg, store, scrub }) => {
    const d = await pushBlob(reg, "g/x", enc.encode("young"));
    await reg.blobs.delete("g/x", d);
    const young = await scrub({ graceSecs: 3600 });
    assert.equal(young!.blobs, 0);
    assert.equal(young!.young, 1);
    const dry = await scrub({ dryRun: true });
    assert.equal(dry!.blobs, 1);
    assert.equal(dry!.dryRun, true);
    assert.ok(await store.exists(d), "dry run deletes nothing");
    assert.equal((await scrub())!.blobs, 1);
    assert.equal(await store.exists(d), false);
  });
});

Deno.test("scrub: layers referenced by a manifest cannot lose ownership, so they stay", async () => {
  await withEnv(async ({ reg, store, scrub }) => {
    const layer = await pushBlob(reg, "m/app", enc.encode("layer bytes"));
    const digest = await pushManifest(reg, "m/app", "v1", [layer], 60_000);
    await assert.rejects(() => reg.blobs.delete("m/app", layer), (e: RegistryError) => {
      assert.equal(e.code, "DENIED");
      return true;
    });
    assert.equal((await scrub())!.blobs, 0);
    assert.ok(
      await store.exists(digest),
      "out-of-line manifest body kept while its revision lives",
    );
    const got = await reg.manifests.get("m/app", "v1", true);
    assert.equal(sha256(got.body!), digest);

    await reg.manifests.delete("m/app", digest, null);
    const s = await scrub();
    assert.equal(s!.blobs, 1, "the manifest body; the layer is still owned");
    assert.equal(await store.exists(digest), false);
    assert.ok(await store.exists(layer));
  });
});

Deno.test("scrub: a writer racing a claimed digest gets 503 RECLAMATION_IN_PROGRESS; stale claims lift", async () => {
  await withEnv(async ({ reg, kv, scrub }) => {
    const bytes = enc.encode("contended");
    const d = sha256(bytes);
    await kv.set(K.reclaim(d), { at: Date.now() });
    await assert.rejects(() => pushBlob(reg, "r/x", bytes), (e: RegistryError) => {
      assert.equal(e.code, "RECLAMATION_IN_PROGRESS");
      assert.equal(e.status, 503);
      assert.ok(Number(e.headers?.["Retry-After"]) > 0);
      return true;
    });
    // A claim left by a scrub that died long ago no longer blocks writers.
    await kv.set(K.reclaim(d), { at: Date.now() - STALE_MARKER_MS - 1000 });
    assert.equal(await pushBlob(reg, "r/x", bytes), d);
    assert.equal((await kv.get(K.reclaim(d))).value, null);

    // An abandoned claim on an owned digest is released by the next scrub, bytes kept.
    await kv.set(K.reclaim(d), { at: Date.now() });
    assert.equal((await scrub())!.blobs, 0);
    assert.equal((await kv.get(K.reclaim(d))).value, null);
    assert.equal((await reg.blobs.read("r/x", d, null, false)).size, bytes.byteLength);
  });
});

Deno.test("scrub: idle upload sessions and orphan upload files go; active ones stay", async () => {
  await withEnv(async ({ reg, kv, dir, scrub }) => {
    const start = () =>
      reg.uploads.start("u/x", {
        digest: null,
        digestAlgorithm: null,
        mount: null,
        from: null,
        canRead: () => true,
        body: null,
        contentLength: null,
      });
    const idle = await start();
    const active = await start();
    assert.equal(idle.kind, "session");
    assert.equal(active.kind, "session");
    if (idle.kind !== "session" || active.kind !== "session") return;
    const key = K.upload("u/x", idle.uuid);
    const rec = (await kv.get<Record<string, unknown>>(key)).value!;
    await kv.set(key, { ...rec, startedAt: 0, updatedAt: 0 });
    const orphan = join(
      dir,
      "blobs",
      "uploads",
      "put-x",
    );
    await Deno.writeFile(orphan, enc.encode("half"));
    await Deno.utime(orphan, 0, 0);

    const s = await scrub();
    assert.equal(s!.uploads, 2, "the idle session and the orphan file");
    assert.equal((await kv.get(key)).value, null);
    assert.ok((await kv.get(K.upload("u/x", active.uuid))).value);
    await assert.rejects(() => Deno.stat(orphan));
    assert.equal(await reg.uploads.status("u/x", active.uuid), 0);
  }, (c) => c.global.uploadTimeoutSecs = 3600);
});

Deno.test("scrub: reaps index keys of emptied namespaces and repairs reverse keys", async () => {
  await withEnv(async ({ reg, kv, scrub }) => {
    const layer = await pushBlob(reg, "e/gone", enc.encode("l"));
    const digest = await pushManifest(reg, "e/gone", "v1", [layer]);
    await pushManifest(reg, "e/kept", "v1", []);
    await reg.manifests.delete("e/gone", digest, null);
    assert.ok((await kv.get(K.ns("e/gone"))).value, "index key outlives the content");
    assert.ok((await kv.get(K.tagver("e/gone"))).value, "so does its tag-list version");
    await kv.set(K.unlinkver("e/gone"), true); // as a blob delete there would have left it

    // Damage derivable keys: a missing owner and a bogus one.
    await kv.delete(K.owner(layer, "e/gone"));
    await kv.set(K.owner(layer, "nowhere/ns"), true);

    const s = await scrub();
    assert.equal(s!.namespaces, 1);
    assert.equal(s!.repaired, 2);
    assert.equal((await kv.get(K.ns("e/gone"))).value, null);
    assert.equal((await kv.get(K.tagver("e/gone"))).value, null, "version keys go with it");
    assert.equal((await kv.get(K.unlinkver("e/gone"))).value, null);
    assert.ok((await kv.get(K.ns("e/kept"))).value);
    assert.ok((await kv.get(K.tagver("e/kept"))).value);
    assert.ok((await kv.get(K.owner(layer, "e/gone"))).value);
    assert.equal((await kv.get(K.owner(layer, "nowhere/ns"))).value, null);
    assert.equal((await scrub())!.repaired, 0, "a second pass finds nothing to repair");
  });
});

Deno.test("scrub: one scrub at a time", async () => {
  await withEnv(async ({ kv, store, scrub }) => {
    await kv.set(K.scrubLock(), { at: Date.now(), holder: "someone-else" });
    assert.equal(await scrub(), null);
    await kv.set(K.scrubLock(), { at: Date.now() - 3_600_000, holder: "someone-else" });
    assert.ok(await scrub(), "an expired lease is taken over");
    assert.ok(store);
  });
});

Deno.test("scrub: a named holder takes over its own live-looking lease (a restarted server)", async () => {
  await withEnv(async ({ kv, store }) => {
    const cfg = defaultConfig();
    // The server that crashed a moment ago still "holds" the lease.
    await kv.set(K.scrubLock(), { at: Date.now(), holder: "wharf serve" });
    const cli = new Scrubber(cfg, kv, store);
    assert.equal(await cli.run({ graceSecs: 0 }), null, "another holder waits");
    const restarted = new Scrubber(cfg, kv, store, null, "wharf serve");
    assert.ok(await restarted.run({ graceSecs: 0 }), "the same name resumes at once");
    assert.equal((await kv.get(K.scrubLock())).value, null, "and releases it when done");
  });
});
