// A broken machine is not a verdict about an image (issue 33), over HTTP with real servers: the
// index walk's sandbox children killed from outside (SIGKILL, as the OOM killer does) make the
// layer answer 503 PROVIDER_UNAVAILABLE with Retry-After, never 404 UNSUPPORTED, and it is listed
// once the killing stops; a rescan meanwhile keeps the image's good report; and the damage older
// versions wrote (`unsupported` records "no sandbox process could be started", reports built from
// them) is healed by a restart alone, and queued by `reindex` and `scan` without flags.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import {
  drainQueues,
  runCli,
  startServer,
  type TestServer,
  withServer,
} from "../helpers/server.ts";
import { openTestKv } from "../helpers/kv.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { loadConfigFiles } from "../../lib/config/mod.ts";
import { openBlobStore } from "../../lib/storage/mod.ts";
import { K } from "../../lib/kv/mod.ts";
import { INDEX_VERSION, indexKey, type IndexRecord, MAX_HEALS } from "../../lib/index/mod.ts";
import type { ImageReport, ScanRecord } from "../../lib/scan/mod.ts";

const JOBS = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 200
backoff_max_ms = 600
max_attempts = 200
lease_secs = 5
`;

/** What versions before issue 33 recorded when no sandbox process could be started. */
const OLD_ERROR =
  'index: no sandbox process could be started (Requires run access to "deno", run again with the --allow-run flag); set sandbox = "off" to parse in the serving process';

const OS_RELEASE = 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n';
const STATUS = [
  ["openssl", "3.0.11-1~deb12u1"],
  ["zlib1g", "1:1.2.13.dfsg-1"],
  ["bash", "5.2.15-2+b2"],
].map(([p, v]) =>
  `Package: ${p}\nStatus: install ok installed\nArchitecture: amd64\nVersion: ${v}\n`
).join("\n");

/** A two-layer Debian image: os-release in one layer, the package database in the other. */
function debianLayers(tag: string): Uint8Array[] {
  return [
    tarOf([
      { path: "etc", type: "5" },
      { path: "etc/os-release", data: OS_RELEASE },
      { path: "etc/tag", data: tag },
    ]),
    tarOf([
      { path: "var/lib/dpkg", type: "5" },
      { path: "var/lib/dpkg/status", data: STATUS },
      { path: "var/lib/dpkg/tag", data: tag },
    ]),
  ];
}

const entries = (ns: string, d: string) => `/v2/${ns}/_svc/layers/${d}/entries`;
const vuln = (ns: string, d: string) => `/v2/${ns}/_svc/vulnerabilities/${d}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  what: string,
  s: TestServer,
  f: () => Promise<T | null> | T | null,
  ms = 60_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== null) return v;
    if (Date.now() > deadline) {
      assert.fail(`${what}: not within ${ms} ms\n${s.output().slice(-3000)}`);
    }
    await sleep(100);
  }
}

/**
 * SIGKILLs every child of `pid` (the server) whose command line names `module` (a sandbox child's
 * entry module, in either launch style), from outside, as the kernel's OOM killer would; by
 * process id, so no other process on the machine is touched. Returns how many.
 */
function killChildren(pid: number, module: string): number {
  let killed = 0;
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== pid || !Deno.readTextFileSync(`/proc/${e.name}/cmdline`).includes(module)) {
        continue;
      }
      Deno.kill(Number(e.name), "SIGKILL");
      killed++;
    } catch { /* gone meanwhile */ }
  }
  return killed;
}

/** Keeps killing `module`'s children of the server until stopped; counts the kills. */
function killer(s: TestServer, module: string): { kills(): number; stop(): Promise<void> } {
  let on = true;
  let kills = 0;
  const loop = (async () => {
    while (on) {
      kills += killChildren(s.pid, module);
      await sleep(10);
    }
  })();
  return {
    kills: () => kills,
    stop: async () => {
      on = false;
      await loop;
    },
  };
}

async function jobs(s: TestServer, queue: string, which: "list" | "failed") {
  const r = await req(s, `/v2/_svc/jobs/${which}?queue=${queue}&n=100`);
  assert.equal(r.status, 200);
  const b = await r.json();
  return (which === "list" ? b.jobs : b.failed) as {
    lock_key: string;
    attempts: number;
    last_error?: string;
  }[];
}

/** The image's report once there is one (202 while it is scanned). */
async function report(s: TestServer, ns: string, digest: string): Promise<ImageReport> {
  return await until(`report of ${digest}`, s, async () => {
    const r = await req(s, vuln(ns, digest));
    if (r.status === 202) {
      await r.body?.cancel();
      return null;
    }
    assert.equal(r.status, 200);
    return await r.json() as ImageReport;
  });
}

Deno.test({
  ...serverTestOpts,
  name: "machine failure: index children killed from outside answer 503 + Retry-After, then heal",
  fn: () =>
    withServer({ config: `${JOBS}\n[scan]\non_push = false\n` }, async (s) => {
      const walks = killer(s, "walk_child.ts");
      let layer: string;
      try {
        // More PEM blocks than the serving process parses: the details endpoint uses a sandbox.
        const bundle = "-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n"
          .repeat(40);
        const img = await pushTarImage(s.url, "m/img", "v1", [
          tarOf([{ path: "etc/hello.txt", data: "hello\n" }, { path: "ca.pem", data: bundle }]),
        ]);
        layer = img.layers[0];
        // While every walk is killed: 503 naming the cause, with a retry time, never a verdict.
        const r = await until("a 503", s, async () => {
          const r = await req(s, entries("m/img", layer));
          if (r.status === 503) return r;
          if (r.status !== 202) assert.fail(`${r.status}: ${await r.text()}`);
          await r.body?.cancel();
          return null;
        });
        const after = Number(r.headers.get("retry-after"));
        assert.ok(Number.isInteger(after) && after >= 1, String(r.headers.get("retry-after")));
        const e = await assertErrorCode(r, 503, "PROVIDER_UNAVAILABLE");
        assert.match(
          String(e.detail),
          /^sha256:[0-9a-f]{64}: indexing could not run: index sandbox was ended by SIGKILL from outside.*; it is retried$/,
        );
        const file = await req(s, `/v2/m/img/_svc/layers/${layer}/file?path=etc/hello.txt`);
        await assertErrorCode(file, 503, "PROVIDER_UNAVAILABLE");
        assert.ok(walks.kills() >= 1);
        assert.match(
          s.output(),
          /"level":"warn","msg":"index of sha256:[0-9a-f]{64} could not run \(machine\): index sandbox was ended by SIGKILL from outside[^\n]*; retried"/,
        );
        // The job is pending for its retry, not dead-lettered.
        assert.deepEqual(await jobs(s, "index", "failed"), []);
      } finally {
        await walks.stop();
      }
      // The killing stops: the job's own retry lists the layer, nobody asks for it meanwhile.
      await until("the index queue drained", s, async () => {
        return (await jobs(s, "index", "list")).length === 0 ? true : null;
      });
      const listed = await req(s, entries("m/img", layer));
      assert.equal(listed.status, 200);
      const paths = (await listed.json()).entries.map((x: { path: string }) => x.path);
      assert.deepEqual(paths.sort(), ["ca.pem", "etc/hello.txt"]);
      assert.deepEqual(await jobs(s, "index", "failed"), [], "no dead letter, no verdict");

      // The details endpoint's sandbox killed from outside: 503 too, not 404 UNSUPPORTED.
      const details = `/v2/m/img/_svc/layers/${layer}/details?path=ca.pem`;
      const pems = killer(s, "details_child.ts");
      try {
        const d = await req(s, details);
        assert.ok(d.headers.get("retry-after"));
        const de = await assertErrorCode(d, 503, "PROVIDER_UNAVAILABLE");
        assert.match(String(de.detail), /details could not run: .*SIGKILL from outside/);
      } finally {
        await pems.stop();
      }
      const ok = await req(s, details);
      assert.equal(ok.status, 200);
      assert.ok(Array.isArray((await ok.json()).certificates));
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "machine failure: a rescan while a layer cannot be indexed keeps the good report",
  fn: async () => {
    const s1 = await startServer({ config: JOBS });
    const dataDir = s1.dataDir;
    let s2: TestServer | null = null;
    let walks: ReturnType<typeof killer> | null = null;
    try {
      const img = await pushTarImage(s1.url, "m/keep", "v1", debianLayers("keep"));
      await report(s1, "m/keep", img.digest);
      // A request while the push's scan ran may have queued another: the last one is the report.
      await drainQueues(s1.url);
      const good = await report(s1, "m/keep", img.digest);
      assert.equal(good.packages.length, 3);
      await s1.stop();
      // An older version's damage on one layer, healed MAX_HEALS times already: no heal queues
      // it, only the scan below does.
      const t = await openTestKv(join(dataDir, "metadata.kv"));
      const rec = (await t.kv.get<IndexRecord>(indexKey(img.layers[1]))).value!;
      await t.kv.set(indexKey(img.layers[1]), {
        ...rec,
        state: "unsupported",
        entries: 0,
        error: OLD_ERROR,
        heals: MAX_HEALS,
      });
      await t.close();

      s2 = await startServer({ config: JOBS, dataDir });
      walks = killer(s2, "walk_child.ts");
      const queued = await runCli(s2, "scan", ["--rescan"]);
      assert.equal(queued.code, 0, queued.stderr);
      assert.match(queued.stdout, /queued 1 image/);
      const scan = new RegExp(
        `"level":"warn","msg":"scan of ${img.digest} could not run \\(machine\\): layer ${
          img.layers[1]
        } could not be indexed: [^\\n]*; retried"`,
      );
      // The scan's attempt fails for a machine reason (its warn line), or a report lands.
      const kept = await until("the rescan's first attempt", s2, async () => {
        const r = await report(s2!, "m/keep", img.digest);
        return r.scanned_at !== good.scanned_at || scan.test(s2!.output()) ? r : null;
      });
      // The stored report is the good one, as it was; the scan waits for its retry.
      assert.equal(kept.scanned_at, good.scanned_at, "a report replaced the good one");
      assert.equal(kept.packages.length, 3);
      assert.equal(kept.os?.id, "debian");
      await until("a killed index retry", s2, () => walks!.kills() > 0 ? true : null);
      assert.deepEqual(await jobs(s2, "scan", "failed"), []);
      assert.deepEqual(
        (await jobs(s2, "scan", "list")).map((j) => j.lock_key),
        [img.digest],
        "the scan is pending for its retry",
      );
      await walks.stop();
      walks = null;
      // Once the layer can be indexed the retry lands a report of the whole image.
      const next = await until("the rescan", s2, async () => {
        const r = await report(s2!, "m/keep", img.digest);
        return r.scanned_at !== good.scanned_at ? r : null;
      });
      assert.equal(next.packages.length, 3);
      assert.equal(next.os?.id, "debian");
      assert.deepEqual(await jobs(s2, "scan", "failed"), []);
    } finally {
      await walks?.stop();
      await s1.stop().catch(() => {});
      await s2?.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "machine failure: older versions' damage is healed by a restart; reindex and scan queue it",
  fn: async () => {
    const s1 = await startServer({ config: JOBS });
    const dataDir = s1.dataDir;
    let s2: TestServer | null = null;
    try {
      const hurt = await pushTarImage(s1.url, "m/hurt", "v1", debianLayers("hurt"));
      const fine = await pushTarImage(s1.url, "m/fine", "v1", debianLayers("fine"));
      await report(s1, "m/fine", fine.digest);
      assert.equal((await report(s1, "m/hurt", hurt.digest)).packages.length, 3);
      await drainQueues(s1.url);
      const fineReport = await report(s1, "m/fine", fine.digest);
      await s1.stop();

      // What a server without --allow-run wrote before issue 33: every layer of `hurt`
      // `unsupported` for want of a sandbox, and the report built from no files.
      const t = await openTestKv(join(dataDir, "metadata.kv"));
      for (const d of hurt.layers) {
        const rec = (await t.kv.get<IndexRecord>(indexKey(d))).value!;
        await t.kv.set(indexKey(d), {
          version: INDEX_VERSION,
          state: "unsupported",
          compression: null,
          uncompressedSize: 0,
          entries: 0,
          error: OLD_ERROR,
          indexedAt: rec.indexedAt,
          base: rec.base,
        });
      }
      const rec = (await t.kv.get<ScanRecord>(K.scanReport(hurt.digest))).value!;
      const { sound: _s, heals: _h, ...older } = rec;
      const empty: ImageReport = {
        digest: hurt.digest,
        scanned_at: new Date(rec.scanned_at).toISOString(),
        platform: { os: "linux", architecture: "amd64" },
        os: null,
        advisories: null,
        vulnerabilities_checked: false,
        not_checked: "no advisory data is loaded",
        counts: rec.counts,
        packages: [],
        findings: [],
        config_secrets: [],
        warnings: hurt.layers.map((d) => `layer ${d} is unsupported: ${OLD_ERROR}`),
      };
      const store = await openBlobStore(await loadConfigFiles([s1.configPath]));
      await store.writeDerived(
        rec.file,
        ReadableStream.from([new TextEncoder().encode(JSON.stringify(empty))]),
      );
      await t.kv.set(K.scanReport(hurt.digest), { ...older, packages: 0, os: null });
      await t.close();

      // Without flags, the commands take the damage for what it is: work to do again.
      const reindex = await runCli(s1, "reindex", ["--dry-run"]);
      assert.equal(reindex.code, 0, reindex.stderr);
      for (const d of hurt.layers) assert.match(reindex.stdout, new RegExp(`would index ${d}`));
      assert.match(reindex.stdout, /would queue 2$/m);
      const scan = await runCli(s1, "scan", ["--dry-run"]);
      assert.equal(scan.code, 0, scan.stderr);
      assert.match(scan.stdout, new RegExp(`would scan m/hurt@${hurt.digest}`));
      assert.match(scan.stdout, /would queue 1 image/);

      // A restart heals it, with nobody asking for the layers or the report.
      s2 = await startServer({ config: JOBS, dataDir });
      const heal =
        /"msg":"heal: queued again what failed for a machine reason","layers":2,"index_jobs":0,"reports":1/;
      await until("the heal", s2, () => heal.test(s2!.output()) ? true : null);
      await drainQueues(s2.url);
      for (const d of hurt.layers) {
        const r = await req(s2, entries("m/hurt", d));
        assert.equal(r.status, 200, `${d}: ${r.status}`);
        assert.ok((await r.json()).entries.length >= 3);
      }
      const healed = await report(s2, "m/hurt", hurt.digest);
      assert.equal(healed.packages.length, 3);
      assert.equal(healed.os?.id, "debian");
      assert.deepEqual(healed.warnings.filter((w) => /sandbox/.test(w)), []);
      assert.equal((await report(s2, "m/fine", fine.digest)).scanned_at, fineReport.scanned_at);
      // Nothing is left to queue.
      const again = await runCli(s2, "reindex", ["--dry-run"]);
      assert.match(again.stdout, /would queue 0$/m);
      assert.match((await runCli(s2, "scan", ["--dry-run"])).stdout, /would queue 0 image/);
    } finally {
      await s1.stop().catch(() => {});
      await s2?.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
