import assert from "node:assert/strict";
import { statfsSync } from "node:fs";
import { RegistryError } from "../oci/mod.ts";
import { DEFAULT_RESERVE_MAX, FAULT_HOLD_MS, StoreWatch } from "./watch.ts";

function watchOn(dir: string, minFreeBytes: number | null, kvDir: string | null = dir) {
  return new StoreWatch({
    blob: { label: `the blob store (${dir})`, dir },
    metadata: { label: `the metadata store (${kvDir}/m.kv)`, dir: kvDir },
    minFreeBytes,
  });
}

Deno.test("StoreWatch: below min_free_bytes a new upload is refused with 503 naming the store", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const free = (() => {
      const s = statfsSync(dir);
      return s.bavail * s.bsize;
    })();
    const w = watchOn(dir, free + 2 ** 40, null);
    const e = await w.admit().then(() => null, (e) => e);
    assert.ok(e instanceof RegistryError, String(e));
    assert.equal(e.status, 503);
    assert.equal(e.code, "PROVIDER_UNAVAILABLE");
    assert.equal(e.headers["Retry-After"], "30");
    assert.match(
      e.detail,
      /^the blob store \(.*\) is full \(.* free, under the .* reserve of \[blob_store\] min_free_bytes; new uploads are refused until space is freed\): retry later$/,
    );
    assert.deepEqual([...w.refusals.values()], [{ store: "blob", cause: "reserve", n: 1 }]);
    assert.match((await w.problems())[0], /^the blob store \(.*\) is full \(/);
    assert.equal((await w.figures())[0].available, false);

    // 0 turns the reserve off; the default is 1% of the filesystem, at most 256 MiB.
    await watchOn(dir, 0).admit();
    const d = await watchOn(dir, null).figures();
    const total = statfsSync(dir).blocks * statfsSync(dir).bsize;
    assert.equal(d[0].reserveBytes, Math.min(DEFAULT_RESERVE_MAX, Math.floor(total * 0.01)));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("StoreWatch: one filesystem under both stores is read and reported once", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const w = watchOn(dir, 2 ** 50);
    const e = await w.admit().then(() => null, (e) => e as RegistryError);
    assert.match(e!.detail, /^the filesystem of the blob store \(.*\) and the metadata store \(/);
    // refused once, counted for both stores it holds
    assert.deepEqual([...w.refusals.values()].map((r) => r.store), ["blob", "metadata"]);
    const figures = await w.figures();
    assert.equal(figures[0].freeBytes, figures[1].freeBytes);
    assert.equal((await w.problems()).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("StoreWatch: bytes written since the last reading count against the reserve", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const s = statfsSync(dir);
    const free = s.bavail * s.bsize;
    // Room for the reading's free space minus 1 GiB: admitted until this process writes 2 GiB.
    const w = watchOn(dir, Math.max(0, free - 2 ** 30), null);
    await w.admit();
    w.spent(2 ** 31);
    await assert.rejects(w.admit(), (e: RegistryError) => e.status === 503);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("StoreWatch: a fault is reported until the store answers again, or for FAULT_HOLD_MS", async () => {
  const w = watchOn("/nonexistent-wharf-dir", 0, null);
  assert.deepEqual(await w.problems(), []);
  w.blob.fault("unavailable", "the blob store (S3 http://x bucket b) is unreachable: GET k");
  w.metadata.fault("locked", "the metadata store (m.kv) is locked by another process");
  const p = await w.problems();
  assert.equal(p.length, 2);
  assert.match(
    p[0],
    /^the blob store \(S3 http:\/\/x bucket b\) is unreachable: GET k \(0 s ago\)$/,
  );
  const f = await w.figures();
  assert.deepEqual(f.map((x) => [x.store, x.available, x.freeBytes]), [
    ["blob", false, null],
    ["metadata", false, null],
  ]);
  w.blob.ok();
  assert.equal((await w.problems()).length, 1);
  assert.deepEqual(
    [...w.refusals.values()].map((r) => `${r.store}:${r.cause}:${r.n}`),
    ["blob:unavailable:1", "metadata:locked:1"],
  );
  // Nothing clears it while no operation runs: it ages out.
  const now = Date.now;
  try {
    Date.now = () => now() + FAULT_HOLD_MS + 1;
    assert.deepEqual(await w.problems(), []);
  } finally {
    Date.now = now;
  }
});
