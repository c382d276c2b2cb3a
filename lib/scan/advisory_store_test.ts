import assert from "node:assert/strict";
import { join } from "node:path";
import { openTestKv } from "../../tests/helpers/kv.ts";
import { AdvisoryStore } from "./advisory_store.ts";
import { zipMembers, zipRead } from "./zip.ts";
import { missingReason, runs } from "../../tests/e2e/_tools.ts";

const bsdtarMissing = missingReason(
  "advisory zip",
  runs("bsdtar", ["--version"]) ? [] : ["bsdtar"],
  "apt-get install libarchive-tools",
);

const osv = (id: string, eco: string, name: string, fixed: string, extra: object = {}) =>
  JSON.stringify({
    id,
    modified: "2024-01-01T00:00:00Z",
    affected: [{
      package: { ecosystem: eco, name },
      ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed }] }],
    }],
    ...extra,
  });

async function zipDir(src: string, out: string): Promise<void> {
  const names: string[] = [];
  for await (const e of Deno.readDir(src)) names.push(e.name);
  const r = await new Deno.Command("bsdtar", {
    args: ["--format", "zip", "-cf", out, "-C", src, ...names],
  }).output();
  assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
}

Deno.test({
  name: "advisories load from zips and JSON folders, reload only on change, old snapshot dropped",
  ignore: bsdtarMissing !== null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-osv-" });
    const t = await openTestKv();
    try {
      const stage = join(dir, "stage");
      await Deno.mkdir(stage);
      for (let i = 0; i < 300; i++) {
        await Deno.writeTextFile(
          join(stage, `DEBIAN-CVE-2024-${i}.json`),
          osv(`DEBIAN-CVE-2024-${i}`, "Debian:12", `pkg${i % 7}`, `1.${i}`),
        );
      }
      await Deno.writeTextFile(join(stage, "broken.json"), "{ not json");
      await Deno.mkdir(join(dir, "adv", "Debian"), { recursive: true });
      await zipDir(stage, join(dir, "adv", "Debian", "all.zip"));
      await Deno.mkdir(join(dir, "adv", "Alpine"), { recursive: true });
      await Deno.writeTextFile(
        join(dir, "adv", "Alpine", "ALPINE-1.json"),
        osv("ALPINE-1", "Alpine:v3.20", "openssl", "3.3.2-r0"),
      );
      await Deno.writeTextFile(join(dir, "adv", "Alpine", "notes.txt"), "ignored");

      const store = new AdvisoryStore(t.kv);
      const first = await store.load(join(dir, "adv"));
      assert.equal(first.loaded, true);
      assert.equal(first.meta!.records, 301);
      assert.deepEqual(first.meta!.ecosystems, { "Debian:12": 300, "Alpine:v3.20": 1 });
      assert.equal(first.meta!.error_count, 1);
      assert.match(first.meta!.errors[0], /broken\.json: not JSON/);
      const pkg3 = await store.lookup(first.meta!.snapshot, "Debian:12", "pkg3");
      assert.equal(pkg3.length, 43); // i % 7 === 3 for i < 300
      assert.ok(pkg3.every((a) => a.package === "pkg3"));
      assert.equal((await store.lookup(first.meta!.snapshot, "Alpine:v3.20", "openssl")).length, 1);

      // Unchanged files: nothing reloaded.
      assert.equal(await store.changed(join(dir, "adv")), false);
      assert.equal((await store.load(join(dir, "adv"))).loaded, false);

      // A change: a new snapshot, the old one's entries gone.
      await Deno.writeTextFile(
        join(dir, "adv", "Alpine", "ALPINE-2.json"),
        osv("ALPINE-2", "Alpine:v3.20", "musl", "1.2.5-r1"),
      );
      assert.equal(await store.changed(join(dir, "adv")), true);
      const second = await store.load(join(dir, "adv"));
      assert.equal(second.loaded, true);
      assert.notEqual(second.meta!.snapshot, first.meta!.snapshot);
      assert.equal(second.meta!.records, 302);
      assert.deepEqual(await store.lookup(first.meta!.snapshot, "Debian:12", "pkg3"), []);
      assert.equal((await store.meta())!.snapshot, second.meta!.snapshot);
      assert.deepEqual(t.violations, []);
    } finally {
      await t.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "zip: members listed and read; a corrupt or hostile archive is a ZipError",
  ignore: bsdtarMissing !== null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-zip-" });
    try {
      await Deno.mkdir(join(dir, "src"));
      const big = "x".repeat(200_000);
      await Deno.writeTextFile(join(dir, "src", "a.json"), '{"id":"A"}');
      await Deno.writeTextFile(join(dir, "src", "big.json"), big);
      await zipDir(join(dir, "src"), join(dir, "t.zip"));
      const f = await Deno.open(join(dir, "t.zip"));
      try {
        const size = (await f.stat()).size;
        const m = await zipMembers(f, size);
        assert.deepEqual(m.map((x) => x.name).sort(), ["a.json", "big.json"]);
        const a = m.find((x) => x.name === "a.json")!;
        assert.equal(new TextDecoder().decode(await zipRead(f, a, 1000)), '{"id":"A"}');
        const b = m.find((x) => x.name === "big.json")!;
        assert.equal((await zipRead(f, b, 1 << 20)).length, 200_000);
        await assert.rejects(zipRead(f, b, 1000), /max 1000/);
        // A member whose header claims fewer bytes than it inflates to is refused.
        await assert.rejects(zipRead(f, { ...b, size: 10 }, 1 << 20), /big.json/);
      } finally {
        f.close();
      }
      await Deno.writeTextFile(join(dir, "junk.zip"), "PK not really a zip");
      const j = await Deno.open(join(dir, "junk.zip"));
      try {
        await assert.rejects(zipMembers(j, (await j.stat()).size), /not a zip/);
      } finally {
        j.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("advisories with hostile package names stay inside KV's per-commit key limits", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-osv-long-" });
  const t = await openTestKv();
  try {
    await Deno.mkdir(join(dir, "adv", "npm"), { recursive: true });
    // 400 records whose package names are at the 256-character cap: a commit batched by count
    // alone carried ~130 KiB of keys (KV allows 80 KiB); and one whose ecosystem, name and id,
    // in 3-byte characters, make a key past KV's 2 KiB limit.
    for (let i = 0; i < 400; i++) {
      await Deno.writeTextFile(
        join(dir, "adv", "npm", `GHSA-${i}.json`),
        osv(`GHSA-${i}`, "npm", `${"p".repeat(250)}${i}`, "1.0.0"),
      );
    }
    await Deno.writeTextFile(
      join(dir, "adv", "npm", "GHSA-huge.json"),
      osv(`GHSA-huge${"€".repeat(240)}`, "€".repeat(250), "€".repeat(250), "1.0.0"),
    );
    const store = new AdvisoryStore(t.kv);
    const first = await store.load(join(dir, "adv"));
    assert.equal(first.meta!.affected, 400, JSON.stringify(first.meta).slice(0, 600));
    assert.equal(first.meta!.error_count, 1);
    assert.match(
      first.meta!.errors[0],
      /GHSA-huge\.json: GHSA-huge.*: package or id too long to index/,
    );
    assert.equal(
      (await store.lookup(first.meta!.snapshot, "npm", `${"p".repeat(250)}7`)).length,
      1,
    );
    // A reload drops the old snapshot's long keys, again inside the limits.
    await Deno.remove(join(dir, "adv", "npm", "GHSA-0.json"));
    const second = await store.load(join(dir, "adv"));
    assert.equal(second.meta!.affected, 399);
    assert.deepEqual(await store.lookup(first.meta!.snapshot, "npm", `${"p".repeat(250)}7`), []);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("advisories: a directory without advisory files leaves no snapshot, never an empty one", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-osv-empty-" });
  const t = await openTestKv();
  try {
    // What a first download that failed offline leaves: the fetch's own records, no dump.
    await Deno.mkdir(join(dir, "Debian"));
    await Deno.writeTextFile(join(dir, "Debian", "all.zip.fetch"), '{"error":"offline"}');
    await Deno.writeTextFile(join(dir, ".fetch-run"), "{}");
    const store = new AdvisoryStore(t.kv);
    assert.equal(await store.changed(dir), false, "nothing to load: no load queued");
    assert.deepEqual(await store.load(dir), { meta: null, loaded: false });
    assert.equal(await store.meta(), null);
    // Files arrive, then are all removed: the snapshot goes with them.
    await Deno.writeTextFile(
      join(dir, "Debian", "DEBIAN-1.json"),
      osv("DEBIAN-1", "Debian:12", "openssl", "3.0.12-1"),
    );
    assert.equal(await store.changed(dir), true);
    const loaded = await store.load(dir);
    assert.equal(loaded.meta?.records, 1);
    await Deno.remove(join(dir, "Debian", "DEBIAN-1.json"));
    assert.equal(await store.changed(dir), true);
    assert.deepEqual(await store.load(dir), { meta: null, loaded: true });
    assert.equal(await store.meta(), null);
    assert.deepEqual(await store.lookup(loaded.meta!.snapshot, "Debian:12", "openssl"), []);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
});
