// Issue 25: the fixed work of one pull-through blob, pinned so it does not creep back. Counted
// from the server's own instruments (/metrics: wharf_kv_operation_duration_seconds_count and
// wharf_blob_store_operation_duration_seconds_count by op), minus what reading /metrics costs,
// after the background writes a pull causes have had time to land. Counts, not timings: the
// machine's load does not change them.
import assert from "node:assert/strict";
import { FakeRegistry, randomBytes } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";

type Counts = Record<string, number>;

async function counts(s: TestServer): Promise<Counts> {
  const t = await (await req(s, "/metrics")).text();
  const out: Counts = {};
  const re =
    /^wharf_(kv|blob_store)_operation_duration_seconds_count\{op="(\w+)"\} (\d+(?:\.\d+)?)$/gm;
  for (const m of t.matchAll(re)) out[`${m[1]}.${m[2]}`] = Number(m[3]);
  return out;
}

const minus = (a: Counts, b: Counts): Counts =>
  Object.fromEntries(
    Object.keys(a).map((k) => [k, a[k] - (b[k] ?? 0)] as const).filter(([, v]) => v !== 0),
  );

/** What `fn` costs the server, background writes given `settleMs` to land. */
async function work(s: TestServer, fn: () => Promise<void>, settleMs = 700): Promise<Counts> {
  const a = await counts(s);
  const perRead = minus(await counts(s), a);
  const b = await counts(s);
  await fn();
  await new Promise((r) => setTimeout(r, settleMs));
  return minus(minus(await counts(s), b), perRead);
}

/** Each counted operation at most its budget, and nothing unbudgeted. */
function within(what: string, got: Counts, budget: Counts): void {
  for (const [op, n] of Object.entries(got)) {
    assert.ok(op in budget, `${what}: unbudgeted ${op} × ${n} (${JSON.stringify(got)})`);
    assert.ok(n <= budget[op], `${what}: ${op} × ${n} > ${budget[op]} (${JSON.stringify(got)})`);
  }
}

Deno.test("pull-through: the work of one 200 KiB blob, cold and warm", serverTestOpts, async () => {
  const up = await FakeRegistry.start();
  try {
    const bytes = randomBytes(200 * 1024);
    const digest = up.addBlob("library/small", bytes);
    await withServer({
      // No periodic job polls: every operation counted is one the pulls cause.
      config: `[global.job_queue]\npoll_interval_ms = 600000\n[repository."hub"]\n` +
        `[[repository."hub".upstream]]\nurl = "${up.url}"\n`,
    }, async (s) => {
      // The startup passes (the signature sweep's first walk of verdicts, a second in) are not
      // a pull's work: counting starts after them.
      await new Promise((r) => setTimeout(r, 2000));
      const pull = async () => {
        const r = await req(s, `/v2/hub/library/small/blobs/${digest}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), bytes);
      };
      // Before issue 25: kv get 8, getMany 2, commit 4, list 1; blob store appendUpload 2,
      // openUpload 1, commitUpload 1 (19 operations). The cache job a fill used to queue and
      // delete (2 commits, 3 gets, the worker's wake-up list) is now queued only for a fill still
      // running after INSURE_AFTER_MS or failed; the fill's link is not read twice; the upload
      // file is created by the writer's first append and opened only by a follower that falls
      // behind the memory window (10 operations). Then the link commit read the link with the
      // usage in one getMany, and a repository without a quota is not read before the download
      // (8 operations).
      within("cold", await work(s, pull), {
        // the route's read of link/<ns>/<digest>; the manifest revision of the digest (a blob
        // GET may name a manifest); the blob record (bytes another namespace holds are only
        // linked, not fetched)
        "kv.get": 3,
        // the link commit's read of the link it checks and the usage it adds to (no quota: no
        // usage read before the download)
        "kv.getMany": 1,
        // blob reserve (a scrub cannot claim the digest under the fill), then the link commit
        "kv.commit": 2,
        // the writer's one append of the upload file (it creates the file and syncs it), then
        // its move into place (rename, directory sync: the append's sync stands)
        "blob_store.appendUpload": 1,
        "blob_store.commitUpload": 1,
      });
      // Before and after: the route's read of the link, then the bytes.
      // A blob this small is read whole and checked against its digest (issue 38).
      within("warm", await work(s, pull), { "kv.get": 1, "blob_store.readAll": 1 });
    });
  } finally {
    await up.close();
  }
});
