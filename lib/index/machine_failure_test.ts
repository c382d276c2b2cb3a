// A broken machine is not a verdict about a layer: an index job whose sandbox cannot start (this
// test runs without run permission, as a server lacking --allow-run did) records `unavailable`,
// never `unsupported`, stays pending for a retry, and the layer's endpoints answer 503; the heal
// pass queues such layers (older versions' `unsupported` records of it included) at most
// MAX_HEALS times, and dead-lettered machine failures likewise.
import assert from "node:assert/strict";
import { join } from "node:path";
import { defaultConfig } from "../config/mod.ts";
import { JobQueues, Runs } from "../jobs/mod.ts";
import { K } from "../kv/mod.ts";
import { BlobMeta, ManifestMeta, SvcMeta } from "../metadata/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import { openBlobStore } from "../storage/mod.ts";
import { openTestKv, type TestKv } from "../../tests/helpers/kv.ts";
import { tarOf } from "../../tests/helpers/tar.ts";
import { LayerIndex, type LayerIndexDeps } from "./layer_index.ts";
import { IndexRecords } from "./index_records.ts";
import { INDEX_VERSION, indexKey, type IndexRecord } from "./layer_store.ts";
import { INDEX_KIND, indexLayerJob } from "./layer_jobs.ts";
import { healDeadLetters } from "./layer_heal.ts";
import { MAX_HEALS } from "./machine_failure.ts";

const NS = "team/app";
/** What versions before issue 33 recorded when no sandbox process could be started. */
const OLD_ERROR =
  'index: no sandbox process could be started (Requires run access to "deno", run again with the --allow-run flag); set sandbox = "off" to parse in the serving process';

async function sha256(b: Uint8Array): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest("SHA-256", b as BufferSource));
  return `sha256:${Array.from(h, (x) => x.toString(16).padStart(2, "0")).join("")}`;
}

interface Fixture {
  t: TestKv;
  jobs: JobQueues;
  layers: LayerIndex;
  /** stores a layer blob, linked to NS; returns its digest */
  layer(text: string): Promise<string>;
  close(): Promise<void>;
}

async function fixture(backoffMinMs = 60_000): Promise<Fixture> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-machine-" });
  const cfg = defaultConfig();
  cfg.blobStore = { fs: { rootDir: join(dir, "blobs") }, s3: null };
  cfg.global.jobQueue = {
    ...cfg.global.jobQueue,
    pollIntervalMs: 50,
    backoffMinMs,
    backoffMaxMs: backoffMinMs,
  };
  const t = await openTestKv(join(dir, "m.kv"));
  const store = await openBlobStore(cfg);
  const jobs = new JobQueues(t.kv, cfg.global.jobQueue);
  const layers = new LayerIndex({
    cfg,
    records: new IndexRecords(t.kv),
    blobs: new BlobMeta(t.kv),
    catalog: new SvcMeta(t.kv),
    revisions: new ManifestMeta(t.kv),
    runs: new Runs(t.kv),
    store,
    jobs,
    manifests: { body: () => Promise.reject(new Error("no manifests here")) },
    upstream: {
      readBlob: () => Promise.reject(new Error("no upstream here")),
      pullThrough: { repository: () => null },
    } as unknown as LayerIndexDeps["upstream"],
  });
  return {
    t,
    jobs,
    layers,
    async layer(text: string) {
      const bytes = tarOf([{ path: "etc/hello.txt", data: text }]);
      const digest = await sha256(bytes);
      await store.put(digest, bytes);
      await t.kv.set(K.blob(digest), { size: bytes.length, at: Date.now() });
      await t.kv.set(K.link(NS, digest), { size: bytes.length, at: Date.now() });
      return digest;
    },
    async close() {
      await jobs.stop(0);
      await t.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

async function until<T>(what: string, f: () => Promise<T | null>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== null) return v;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function refusal(p: Promise<unknown>): Promise<RegistryError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof RegistryError, String(e));
    return e;
  }
  return assert.fail("answered, but a 503 was expected");
}

Deno.test({
  name: "an index job whose sandbox cannot start records no verdict: unavailable, retried, 503",
  // No run permission: no sandbox process can be started (as a server lacking --allow-run).
  permissions: {
    read: true,
    write: true,
    env: true,
    sys: true,
    ffi: true,
    net: true,
    import: true,
    run: false,
  },
  fn: async () => {
    const f = await fixture();
    try {
      const digest = await f.layer("hello\n");
      f.layers.register();
      f.jobs.start("test", ["index"]);
      await f.jobs.queue("index").enqueue(indexLayerJob(digest));
      const queue = f.jobs.queue("index");
      // The job ran once and now waits out its backoff (a minute here).
      const pending = await until("a failed attempt", async () => {
        const p = await queue.listPending(null, 10);
        const j = p.items[0];
        return j && j.attempts === 1 && Date.parse(j.not_before!) > Date.now() + 5_000
          ? p.items
          : null;
      });
      assert.equal(pending.length, 1);
      assert.deepEqual((await queue.listFailed(null, 10)).items, [], "not dead-lettered");
      const rec = (await f.t.kv.get<IndexRecord>(indexKey(digest))).value!;
      assert.equal(rec.state, "unavailable", JSON.stringify(rec));
      assert.equal(rec.version, 0);
      assert.match(rec.error ?? "", /no sandbox process could be started/);

      const e = await refusal(f.layers.entries(NS, digest));
      assert.equal(e.code, "PROVIDER_UNAVAILABLE");
      assert.equal(e.status, 503);
      assert.match(
        e.detail,
        /indexing could not run: index: no sandbox process could be started .*; it is retried$/,
      );
      // Retry-After is the pending job's wait (its backoff, 30-60 s here).
      const after = Number(e.headers["Retry-After"]);
      assert.ok(after >= 5 && after <= 60, e.headers["Retry-After"]);
      // The request made sure a job is pending: the one backing off, not a second one.
      assert.equal((await queue.listPending(null, 10)).items.length, 1);
      const file = await refusal(f.layers.file(NS, digest, "etc/hello.txt", null));
      assert.equal(file.status, 503);
      assert.match(file.detail, /indexing could not run/);
      assert.deepEqual(f.t.violations, []);
    } finally {
      await f.close();
    }
  },
});

Deno.test("heal: machine failures (older versions' included) are queued again, MAX_HEALS times", async () => {
  const f = await fixture();
  try {
    const [old, unavailable, spent, ready, verdict] = await Promise.all(
      ["old", "unavailable", "spent", "ready", "verdict"].map((s) => f.layer(s)),
    );
    const base = {
      compression: null,
      uncompressedSize: 0,
      entries: 0,
      indexedAt: 1,
      base: "",
    };
    const records: [string, IndexRecord][] = [
      [old, { ...base, version: INDEX_VERSION, state: "unsupported", error: OLD_ERROR }],
      [unavailable, { ...base, version: 0, state: "unavailable", error: "killed", heals: 1 }],
      [spent, { ...base, version: 0, state: "unavailable", error: "killed", heals: MAX_HEALS }],
      [ready, { ...base, version: INDEX_VERSION, state: "ready", entries: 1 }],
      [verdict, { ...base, version: INDEX_VERSION, state: "unsupported", error: "not a tar" }],
    ];
    for (const [d, r] of records) await f.t.kv.set(indexKey(d), r);

    const r = await f.layers.heal({ limit: 10 });
    assert.deepEqual(r, { layers: 2, jobs: 0, exhausted: 1 });
    const pending = (await f.jobs.queue("index").listPending(null, 10)).items;
    assert.deepEqual(pending.map((j) => j.lock_key).sort(), [old, unavailable].sort());
    const rec = async (d: string) => (await f.t.kv.get<IndexRecord>(indexKey(d))).value!;
    // The old record is what it always was: a machine failure, not a verdict.
    assert.deepEqual(
      { state: (await rec(old)).state, heals: (await rec(old)).heals },
      { state: "unavailable", heals: 1 },
    );
    assert.equal((await rec(old)).error, OLD_ERROR);
    assert.equal((await rec(unavailable)).heals, 2);
    assert.equal((await rec(spent)).heals, MAX_HEALS);
    assert.equal((await rec(ready)).state, "ready");
    assert.equal((await rec(verdict)).state, "unsupported");
    // The bound per pass.
    await f.t.kv.set(indexKey(old), records[0][1]);
    await f.t.kv.set(indexKey(unavailable), records[1][1]);
    assert.equal((await f.layers.heal({ limit: 1 })).layers, 1);
    assert.deepEqual(f.t.violations, []);
  } finally {
    await f.close();
  }
});

Deno.test("heal: a job dead-lettered for a machine reason goes back MAX_HEALS times; verdicts stay", async () => {
  const f = await fixture(1);
  try {
    const queue = f.jobs.queue("index");
    f.jobs.handle("index", INDEX_KIND, (job) => {
      const d = (job.payload as { digest: string }).digest;
      throw d === "sha256:verdict"
        ? Object.assign(new Error("budget max_cpu_secs (1) exceeded"), { permanent: true })
        : Object.assign(new Error(`index of ${d} could not run (machine): killed; retried`), {
          permanent: true, // dead-lettered at once, as after its last attempt
        });
    });
    f.jobs.start("test", ["index"]);
    for (const d of ["sha256:machine", "sha256:verdict"]) {
      await queue.enqueue(indexLayerJob(d));
    }
    const failed = () =>
      until("dead letters", async () => {
        const items = (await queue.listFailed(null, 10)).items;
        return items.length === 2 ? items : null;
      });
    await failed();
    for (let heal = 1; heal <= MAX_HEALS; heal++) {
      assert.equal(await healDeadLetters(queue, INDEX_KIND, { limit: 10 }), 1, `heal ${heal}`);
      await failed();
    }
    assert.equal(await healDeadLetters(queue, INDEX_KIND, { limit: 10 }), 0, "healed enough");
    assert.deepEqual(
      (await failed()).map((j) => j.lock_key).sort(),
      ["sha256:machine", "sha256:verdict"],
    );
  } finally {
    await f.close();
  }
});
