import assert from "node:assert/strict";
import { join } from "node:path";
import { RegistryError } from "../oci/mod.ts";
import { BUSY_BOUND_MS, PROBE_WAIT_MS, withBusyRetry } from "./kv_busy.ts";
import { kvFaultKind } from "./kv_faults.ts";
import { openMetadata } from "./open.ts";
import { K } from "./keys.ts";
import { holdKvLock } from "../../tests/helpers/kv_lock.ts";
import { ignoreWithoutSmallFs, mountSmallFs } from "../../tests/helpers/small_fs.ts";

Deno.test({
  name: "KV held locked by another process: a write answers 503 naming the file within the " +
    "bound, later ones without queueing behind it, and writes work again when the lock goes (no reopen)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir();
    const path = join(dir, "m.kv");
    const raw = await Deno.openKv(path);
    const seen: (string | null)[] = [];
    const kv = withBusyRetry(raw, { path, report: (f) => seen.push(f ? f.kind : null) });
    try {
      await kv.set(["a"], 1);
      const lock = await holdKvLock(path);
      let t = Date.now();
      const e = await kv.set(["b"], 1).then(() => null, (e) => e);
      const first = Date.now() - t;
      assert.ok(e instanceof RegistryError, String(e));
      assert.equal(e.status, 503);
      assert.equal(e.code, "PROVIDER_UNAVAILABLE");
      assert.equal(e.headers["Retry-After"], "5");
      assert.match(
        e.detail,
        new RegExp(
          `^the metadata store \\(${path}\\) is locked by another process \\(database is locked`,
        ),
      );
      assert.ok(first < BUSY_BOUND_MS + 6_000, `first write answered after ${first} ms`);
      // The lock is known now: one write probes it, the others do not queue behind it.
      const probe = kv.atomic().set(["c"], 1).commit().then(() => null, (e) => e);
      t = Date.now();
      const quick = await kv.delete(["a"]).then(() => null, (e) => e);
      assert.ok(quick instanceof RegistryError && quick.status === 503, String(quick));
      assert.ok(Date.now() - t < 1000, `a write waited ${Date.now() - t} ms behind the probe`);
      assert.ok((await probe) instanceof RegistryError);
      // Reads go on.
      assert.equal((await kv.get(["a"])).value, 1);

      await lock.release();
      assert.ok((await kv.atomic().set(["d"], 1).commit()).ok);
      await kv.set(["e"], 1);
      assert.deepEqual(seen.slice(0, 1), [null]);
      assert.ok(seen.includes("locked"));
      assert.equal(seen.at(-1), null);
    } finally {
      raw.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "KV lock released while a probe is in flight: a write arriving meanwhile waits for the " +
    "probe and lands (CI: the first push after the release answered 503); while the probe " +
    "fails, writes are refused within PROBE_WAIT_MS",
  async fn() {
    // A stand-in handle: SQLite's timing (a probe ends at its busy handler's next wake-up after
    // the release) cannot be pinned on a real file, the order of events can here.
    let locked = true;
    let held: PromiseWithResolvers<void> | null = null;
    const sets: string[] = [];
    const fake = {
      async set(key: Deno.KvKey) {
        if (held) await held.promise;
        if (locked) throw new TypeError("database is locked");
        sets.push(String(key[0]));
        return { ok: true, versionstamp: "00" };
      },
    } as unknown as Deno.Kv;
    const kv = withBusyRetry(fake, { path: "fake.kv" });
    const first = await kv.set(["a"], 1).then(() => null, (e) => e);
    assert.ok(first instanceof RegistryError && first.status === 503, String(first));

    held = Promise.withResolvers<void>();
    const probe = kv.set(["probe"], 1).then(() => null, (e) => e);
    let t = Date.now();
    const refused = await kv.set(["during"], 1).then(() => null, (e) => e);
    const waited = Date.now() - t;
    assert.ok(refused instanceof RegistryError && refused.status === 503, String(refused));
    assert.ok(waited >= PROBE_WAIT_MS - 50 && waited < PROBE_WAIT_MS + 600, `waited ${waited} ms`);

    // The lock goes while the probe still waits; a write arrives before the probe has ended.
    locked = false;
    t = Date.now();
    const after = kv.set(["after"], 1).then(() => null, (e) => e);
    setTimeout(() => held!.resolve(), 50);
    assert.equal(await after, null, "the write after the release landed");
    assert.equal(await probe, null);
    held = null;
    assert.deepEqual(sets.sort(), ["after", "probe"]);
    await kv.set(["later"], 1);
    assert.ok(sets.includes("later"));
  },
});

Deno.test("KV faults are told apart by SQLite's messages, as Deno 2.9 reports them", () => {
  const cases: [string, string | null][] = [
    ["database or disk is full", "full"],
    ["database is locked", "locked"],
    ["Can not write to a read-only database.", "read_only"],
    ["attempt to write a readonly database", "read_only"],
    ["disk I/O error", "unavailable"],
    ["value too large (max 65536 bytes)", null],
  ];
  for (const [msg, kind] of cases) assert.equal(kvFaultKind(new TypeError(msg)), kind, msg);
});

/** Keys keys.ts lists (openMetadata guards keys under WHARF_STRICT_KV_LIMITS=1). */
const [A, B, C] = ["a", "b", "c"].map((x) => K.layerIndex(`sha256:${x}`));

Deno.test({
  name: "KV file read-only when opened: writes answer 503 'is read-only'; once writable again " +
    "the file is opened anew and writes go on without a restart",
  ignore: ignoreWithoutSmallFs("the read-only KV test (chattr on a tmpfs)"),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const fs = await mountSmallFs(8 << 20);
    const path = join(fs.dir, "m.kv");
    const chattr = (flag: string) =>
      new Deno.Command("sh", { args: ["-c", `chattr ${flag} "${path}"*`] }).output();
    try {
      const first = await Deno.openKv(path);
      await first.set(A, 1);
      first.close();
      assert.ok((await chattr("+i")).success);
      const kv = await openMetadata(path);
      try {
        assert.equal((await kv.get(A)).value, 1, "reads work");
        const e = await kv.set(B, 1).then(() => null, (e) => e);
        assert.ok(e instanceof RegistryError && e.status === 503, String(e));
        assert.match(e.detail, /^the metadata store \(.*m\.kv\) is read-only \(/);
        assert.ok((await chattr("-i")).success);
        const t = Date.now();
        for (;;) {
          const r = await kv.set(B, 2).then(() => null, (e) => e);
          if (r === null) break;
          assert.ok(Date.now() - t < 10_000, `still refused: ${r}`);
          await new Promise((res) => setTimeout(res, 200));
        }
        assert.ok((await kv.atomic().set(C, 3).commit()).ok);
        assert.equal((await kv.get(C)).value, 3);
      } finally {
        kv.close();
      }
    } finally {
      await chattr("-i");
      await fs.close();
    }
  },
});
