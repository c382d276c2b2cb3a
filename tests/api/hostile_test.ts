// Issue 22: hostile layers pushed as ordinary images (a push alone queues the index and scan
// jobs), while a client polls /healthz and tags/list. Each case ends with a final, clear answer
// (never a 5xx, never 202 for ever), budgets are named where one tripped, nothing of a failed
// walk stays on disk, the serving thread never stalls for a second and the serving process's
// memory stays flat. The layers are made by tests/fixtures/hostile_layers.py at test time.
import assert from "node:assert/strict";
import { join } from "node:path";
import { req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import {
  entriesPath,
  FAST_JOBS,
  filePath,
  HOSTILE_CASES,
  pushCase,
  reportPath,
  rssOf,
  settle,
  watchServer,
} from "../helpers/hostile.ts";

const CONFIG = `${FAST_JOBS}
[scan]
max_diff_entries = 80000
`;

const entries = entriesPath;
const file = filePath;
const report = reportPath;

async function unsupported(s: TestServer, c: { ns: string; layer: string }, budget: RegExp) {
  const r = await settle(s, entries(c));
  const body = await r.json();
  assert.equal(r.status, 404, JSON.stringify(body));
  assert.equal(body.errors[0].code, "UNSUPPORTED");
  assert.match(JSON.stringify(body.errors[0]), budget);
  // Nothing of the walk stays behind.
  const [, hex] = c.layer.split(":");
  for (const slot of ["a", "b"]) {
    const dir = join(s.dataDir, "blobs", "derived", "index", "sha256", hex, slot);
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, `${dir} left behind`);
  }
}

async function reportOf(s: TestServer, c: { ns: string; manifest: string }) {
  const r = await settle(s, report(c));
  assert.equal(r.status, 200);
  return await r.json();
}

Deno.test({
  name: "hostile layers: every case ends final and named; the server never stalls or grows",
  ...serverTestOpts,
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const cases: Record<string, { ns: string; layer: string; manifest: string }> = {};
      // An image pushed before the hostile ones stays pullable all along.
      cases.names = await pushCase(s, "names");
      const w = watchServer(s, "h/names");
      const idle = await rssOf(s.pid);
      for (const k of HOSTILE_CASES) cases[k] = await pushCase(s, k);

      // Budgets that trip: named in the answer, nothing left on disk.
      await unsupported(s, cases.pax_long_path, /max_path_bytes/);
      await unsupported(s, cases.nested_dirs, /max_path_bytes/);
      await unsupported(s, cases.bomb, /max_uncompressed_ratio/);

      // Names with control characters, quotes, CR/LF, non-ASCII and non-UTF-8 bytes are listed,
      // served and offered for download with a header that cannot break the response.
      {
        const r = await settle(s, entries(cases.names));
        assert.equal(r.status, 200);
        const listed = (await r.json()).entries.map((e: { path: string }) => e.path);
        assert.equal(listed.length, 6);
        for (const p of listed) {
          const d = await req(s, file(cases.names, p, "&download"));
          assert.equal(d.status, 200, p);
          assert.equal(await d.text(), "named\n");
          const cd = d.headers.get("content-disposition") ?? "";
          assert.match(cd, /^attachment; filename="[\x20-\x7e]*"; filename\*=UTF-8''[\x21-\x7e]+$/);
        }
      }

      // Links that loop or leave the layer lead nowhere.
      {
        assert.equal((await settle(s, entries(cases.link_loop))).status, 200);
        for (const p of ["a", "h1", "escape", "var/lib/dpkg/status", "../../etc/passwd"]) {
          const r = await req(s, file(cases.link_loop, p));
          assert.equal(r.status, 404, p);
          await r.body?.cancel();
        }
        assert.deepEqual((await reportOf(s, cases.link_loop)).packages, []);
      }

      // Package databases: bounded, parsed in the sandbox, the report says what was left out.
      assert.deepEqual((await reportOf(s, cases.symlink_chain)).packages, []);
      assert.deepEqual((await reportOf(s, cases.dpkg_newlines)).packages, []);
      {
        const rep = await reportOf(s, cases.dpkg_many);
        assert.equal(rep.packages.length, 25_000);
        assert.ok(rep.warnings.some((w: string) => /25000 packages/.test(w)), rep.warnings);
      }
      {
        const rep = await reportOf(s, cases.os_release_huge);
        assert.ok(JSON.stringify(rep.os ?? null).length < 2048);
      }
      {
        const rep = await reportOf(s, cases.rpm_view);
        assert.deepEqual(rep.packages, []);
        assert.ok(rep.warnings.some((w: string) => /rpmdb\.sqlite/.test(w)), rep.warnings);
      }
      // Garbage databases list nothing; the Python package is named by its directory alone.
      assert.deepEqual(
        (await reportOf(s, cases.garbage_dbs)).packages.map((p: { type: string }) => p.type),
        ["pypi"],
      );

      // 5 million secret-looking lines: a bounded finding list, not a 200 MB listing.
      {
        const r = await settle(s, entries(cases.secrets_flood));
        assert.equal(r.status, 200);
        const e = (await r.json()).entries.find((e: { path: string }) => e.path === "app/keys.txt");
        assert.ok(e.content.secrets.length > 0 && e.content.secrets.length <= 100);
      }

      // Many files: listed and searchable.
      {
        const r = await settle(s, entries(cases.many_files));
        assert.equal(r.status, 200);
        assert.equal((await r.json()).entries.length, 100_000);
      }

      // An image of 60,000 entries is merged for its report in a sandbox, which finds its
      // package database.
      {
        const rep = await reportOf(s, cases.many_files_dpkg);
        assert.deepEqual(rep.packages.map((p: { name: string }) => p.name), ["hello"]);
        assert.deepEqual(rep.warnings, []);
      }

      // A diff of images over 50,000 entries runs in a sandbox; past max_diff_entries it is
      // refused.
      {
        await pushCase(s, "link_loop", cases.many_files.ns, "small");
        const diff = (to: string) =>
          settle(s, `/v2/${cases.many_files.ns}/_svc/diff?from=small&to=${to}`);
        const big = await diff("v1");
        const body = await big.json();
        assert.equal(big.status, 404);
        assert.equal(body.errors[0].code, "UNSUPPORTED");
        assert.match(body.errors[0].message + body.errors[0].detail, /max_diff_entries/);
        const small = await diff("small");
        assert.equal(small.status, 200);
        await small.body?.cancel();
        await pushCase(s, "link_loop", cases.many_files_dpkg.ns, "small");
        const sandboxed = await settle(
          s,
          `/v2/${cases.many_files_dpkg.ns}/_svc/diff?from=small&to=v1&n=10`,
        );
        assert.equal(sandboxed.status, 200);
        const d = await sandboxed.json();
        assert.equal(d.to.regular_files, 60_001);
        assert.equal(d.added.length, 10);
        assert.equal(d.truncated, true);
      }

      // A certificate bundle's details are parsed off the serving thread.
      {
        assert.equal((await settle(s, entries(cases.cert_bundle))).status, 200);
        const d = await req(
          s,
          `/v2/${cases.cert_bundle.ns}/_svc/layers/${cases.cert_bundle.layer}/details?path=etc/ssl/certs/bundle.pem`,
        );
        assert.equal(d.status, 200);
        const certs = (await d.json()).certificates;
        assert.ok(certs.length > 2000, `${certs.length} certificates`);
        assert.equal(certs[0].certificate.subject, "CN=hostile");
      }

      // An ELF file crafted for the details reader's cost gets a partial answer in a few reads
      // (the watcher checks the serving thread stayed responsive meanwhile).
      {
        assert.equal((await settle(s, entries(cases.costly_elf))).status, 200);
        const d = await req(
          s,
          `/v2/${cases.costly_elf.ns}/_svc/layers/${cases.costly_elf.layer}/details?path=usr/bin/costly`,
        );
        assert.equal(d.status, 200);
        const elf = (await d.json()).elf;
        assert.equal(elf.type, "DYN");
        assert.deepEqual([elf.build_id, elf.fortified, elf.stack_canary], ["", [], false]);
      }

      // A path of NULs is listed and its layer stays searchable.
      {
        const r = await settle(s, entries(cases.nul_path));
        assert.equal(r.status, 200);
        const found = await req(s, "/v2/_svc/files/search?path=data/ok.txt");
        assert.equal(found.status, 200);
        const hits = (await found.json()).results.map((h: { layer: string }) => h.layer);
        assert.ok(hits.includes(cases.nul_path.layer));
      }

      // One fixed-Huffman deflate block of 96 MiB (zlib-ng's level 1 writes such blocks): indexed
      // with checkpoints inside it, so a read at its end is exact and inflates at most ~4 MiB.
      {
        assert.equal((await settle(s, entries(cases.long_block))).status, 200);
        const r = await req(s, file(cases.long_block, "zeros"), {
          headers: { Range: `bytes=${96 * 1024 * 1024 - 16}-` },
        });
        assert.equal(r.status, 206);
        assert.deepEqual(new Uint8Array(await r.arrayBuffer()), new Uint8Array(16));
        // Such reads are short, so none takes the long-read slot: three at once are all answered.
        const range = { headers: { Range: `bytes=${96 * 1024 * 1024 - 16}-` } };
        const three = await Promise.all(
          [0, 1, 2].map(() => req(s, file(cases.long_block, "zeros"), range)),
        );
        for (const r of three) {
          assert.equal(r.status, 206);
          assert.equal((await r.arrayBuffer()).byteLength, 16);
        }
        const again = await req(s, file(cases.long_block, "zeros"), range);
        assert.equal(again.status, 206);
        await again.body?.cancel();
        // A read near the start inflates little: never limited.
        const near = await req(s, file(cases.long_block, "zeros"), {
          headers: { Range: "bytes=0-15" },
        });
        assert.equal(near.status, 206);
        await near.body?.cancel();
      }

      // Broken archives: a final answer each, never a 5xx.
      for (
        const k of ["bad_checksum", "plain-as-gzip", "random", "empty", "truncated-many_files"]
      ) {
        const r = await settle(s, entries(cases[k]));
        assert.ok(r.status === 200 || r.status === 404, `${k}: ${r.status}`);
        await r.body?.cancel();
      }

      const { slowest, bad, peakRss } = await w.end();
      console.log(
        `hostile: slowest answer ${Math.round(slowest)} ms, serving RSS ${
          Math.round(idle / 1048576)
        } -> peak ${Math.round(peakRss / 1048576)} MiB`,
      );
      assert.deepEqual(bad, []);
      // A parse on the serving thread stalls answers for many seconds; a busy 2-core CI machine
      // (two test files and the sandbox children at once) delays them up to ~0.8 s.
      assert.ok(slowest < 2500, `an answer took ${Math.round(slowest)} ms`);
      // The serving process holds no layer: its growth is listings read back, reports sent and
      // (here) the test-only KV limit wrapper, 105–180 MiB depending on the machine's load and so
      // on when V8 collects. The 50 MiB target is bench/hostile_bench.ts's; this guards against a
      // parse back in this process (the dpkg flood alone took it to 1.6 GiB, a million files 2.8).
      const growth = (peakRss - idle) / 1024 / 1024;
      assert.ok(growth < 400, `serving process grew ${Math.round(growth)} MiB`);

      // Budgets fail their job at once, by name; nothing is retried.
      const failed = await (await req(s, "/v2/_svc/jobs/failed?queue=index&n=100")).json();
      const errors = failed.failed.map((f: { last_error: string; attempts: number }) => f);
      for (const budget of ["max_path_bytes", "max_uncompressed_ratio"]) {
        const f = errors.find((f: { last_error: string }) => f.last_error.includes(budget));
        assert.ok(f, `no failed job names ${budget}: ${JSON.stringify(errors)}`);
        assert.equal(f.attempts, 1);
      }
      // No sandbox scratch folder is left.
      const left = [];
      for await (const e of Deno.readDir(join(s.dataDir, "blobs", "sandbox"))) left.push(e.name);
      assert.deepEqual(left, []);
    }),
});
