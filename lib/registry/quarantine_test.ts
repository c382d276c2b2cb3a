// Quarantine beside writers and scrub: a digest placed again, or claimed by a reclamation, while
// its bytes were being judged is never reported or moved; a claim a dead process left is finished.
import { openTestKv } from "../../tests/helpers/kv.ts";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { defaultConfig } from "../config/mod.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { K, type QuarantineRecord } from "../kv/mod.ts";
import { Registry } from "./mod.ts";
import { allWriteEffects } from "../services/mod.ts";

const sha256 = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

interface Env {
  reg: Registry;
  kv: Deno.Kv;
  store: FsBlobStore;
}

async function withEnv(fn: (e: Env) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-quarantine-" });
  const cfg = defaultConfig();
  cfg.blobStore.fs.rootDir = join(dir, "blobs");
  const store = new FsBlobStore(cfg.blobStore.fs.rootDir);
  await store.init();
  const t = await openTestKv(join(dir, "kv.sqlite"));
  const reg = new Registry(cfg, t.kv, store, { effects: allWriteEffects(cfg) });
  try {
    await fn({ reg, kv: t.kv, store });
    assert.deepEqual(t.violations, []);
  } finally {
    await reg.close();
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A blob of `ns` (pushed whole) whose stored bytes then rot; returns its digest and bytes. */
async function rotten(e: Env, ns: string): Promise<{ digest: string; good: Uint8Array }> {
  const good = crypto.getRandomValues(new Uint8Array(4096));
  const digest = sha256(good);
  const r = await e.reg.uploads.start(ns, {
    digest,
    digestAlgorithm: null,
    mount: null,
    from: null,
    canRead: () => true,
    body: ReadableStream.from([good]),
    contentLength: good.byteLength,
  });
  assert.equal(r.kind, "created");
  const bad = good.slice();
  bad[100] ^= 1;
  await Deno.writeFile(e.store.localPath(digest), bad);
  return { digest, good };
}

async function state(e: Env, ns: string, digest: string) {
  const [link, marker, rec] = await e.kv.getMany<[unknown, unknown, QuarantineRecord]>([
    K.link(ns, digest),
    K.reclaim(digest),
    K.quarantine(digest),
  ]);
  return {
    linked: link.value !== null,
    marker: marker.value !== null,
    record: rec.value?.stage ?? null,
    stored: await e.store.exists(digest),
  };
}

Deno.test("rotten bytes are quarantined: moved aside, record gone, namespaces unlinked", () =>
  withEnv(async (e) => {
    const { digest } = await rotten(e, "a/x");
    const out = await e.reg.quarantine.quarantine(digest);
    assert.equal(out.result, "quarantined");
    assert.deepEqual(await state(e, "a/x", digest), {
      linked: false,
      marker: false,
      record: "settled",
      stored: false,
    });
    assert.equal((await e.kv.get(K.blob(digest))).value, null);
    const q = await Array.fromAsync(e.store.listQuarantined());
    assert.deepEqual(q.map((o) => o.name), [digest]);
    if (out.result === "quarantined") {
      assert.deepEqual(out.rec.namespaces, ["a/x"]);
      assert.equal(out.rec.kind, "blob");
    }
  }));

Deno.test("a digest placed again between its judgement and the claim is not quarantined", () =>
  withEnv(async (e) => {
    const { digest, good } = await rotten(e, "a/x");
    const seen = await e.reg.quarantine.meta.blobEntry(digest);
    const judged = (await e.reg.quarantine.hash(digest))!;
    assert.notEqual(judged.found, digest);
    // A push of the same digest meanwhile: it reserves (the record moves), then its bytes land.
    await e.kv.set(K.blob(digest), { size: good.byteLength, at: Date.now() });
    await e.store.put(digest, good);
    const out = await e.reg.quarantine.quarantine(digest, { seen, judged });
    assert.equal(out.result, "raced");
    assert.deepEqual(await state(e, "a/x", digest), {
      linked: true,
      marker: false,
      record: null,
      stored: true,
    });
  }));

Deno.test("bytes made whole under the claim: the second hash gives the claim up", () =>
  withEnv(async (e) => {
    const { digest, good } = await rotten(e, "a/x");
    const seen = await e.reg.quarantine.meta.blobEntry(digest);
    const judged = (await e.reg.quarantine.hash(digest))!;
    // A writer that reserved before `seen` was read places its bytes now (its link commit
    // would then meet the marker and retry).
    await e.store.put(digest, good);
    const out = await e.reg.quarantine.quarantine(digest, { seen, judged });
    assert.equal(out.result, "raced");
    assert.deepEqual(await state(e, "a/x", digest), {
      linked: true,
      marker: false,
      record: null,
      stored: true,
    });
    assert.deepEqual(await Array.fromAsync(e.store.listQuarantined()), []);
  }));

Deno.test("a digest scrub is reclaiming (its marker held) is left to scrub", () =>
  withEnv(async (e) => {
    const { digest } = await rotten(e, "a/x");
    await e.kv.set(K.reclaim(digest), { at: Date.now() });
    const out = await e.reg.quarantine.quarantine(digest);
    assert.equal(out.result, "raced");
    assert.equal((await state(e, "a/x", digest)).stored, true);
  }));

Deno.test("a quarantine a process left claimed (or moved) is finished by resume", () =>
  withEnv(async (e) => {
    const { digest } = await rotten(e, "a/x");
    const rec: QuarantineRecord = {
      at: Date.now(),
      stage: "claimed",
      kind: "blob",
      size: 4096,
      found: "sha256:" + "0".repeat(64),
      kept: false,
      namespaces: [],
      more: 0,
      refetch: [],
    };
    assert.ok(
      await e.reg.quarantine.meta.claim(digest, await e.reg.quarantine.meta.blobEntry(digest), rec),
    );
    // The process died here, before it hashed again.
    const out = await e.reg.quarantine.resume(digest, rec);
    assert.equal(out.result, "quarantined");
    assert.deepEqual(await state(e, "a/x", digest), {
      linked: false,
      marker: false,
      record: "settled",
      stored: false,
    });
  }));

Deno.test("unlinking stops once the digest is placed again (a re-push restores it)", () =>
  withEnv(async (e) => {
    const { digest, good } = await rotten(e, "a/x");
    const rec: QuarantineRecord = {
      at: Date.now(),
      stage: "moved",
      kind: "blob",
      size: 4096,
      found: "sha256:" + "0".repeat(64),
      kept: true,
      namespaces: [],
      more: 0,
      refetch: [],
    };
    // Moved, and before its namespaces were unlinked the digest is stored again.
    await e.store.quarantine(digest);
    await e.kv.set(K.quarantine(digest), rec);
    await e.store.put(digest, good);
    const out = await e.reg.quarantine.resume(digest, rec);
    assert.equal(out.result, "quarantined");
    const s = await state(e, "a/x", digest);
    assert.equal(s.linked, true, "the link the re-push relies on stays");
    assert.equal(s.stored, true);
  }));
