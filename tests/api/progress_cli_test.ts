// The long commands' progress (issue 37 item 5), run as a user runs them (`deno task wharf
// <command> -c wharf.toml`) against a real server's data: sync, reindex, scan --rescan, scrub,
// advisories fetch and prune each print periodic plain lines when standard output is not a
// terminal (WHARF_PROGRESS_INTERVAL_SECS=0 here, so every step prints one; by default a quick run
// prints none), JSON lines with --json (progress events, then a summary object), nothing but the
// summary with --quiet, and end with a summary line naming counts and the elapsed time. A
// terminal is simulated once with util-linux's `script` (the in-place line; the reporter's own
// rendering is tested in commands/progress_test.ts).
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { drainQueues, pushImage, startServer, type TestServer } from "../helpers/server.ts";
import { launchOf, wharfCommand, wharfStderr } from "../helpers/launch.ts";
import { zipOf } from "../helpers/zip.ts";

const dec = new TextDecoder();
const enc = new TextEncoder();
const EVERY_STEP = { WHARF_PROGRESS_INTERVAL_SECS: "0" };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(configPath: string, args: string[], env: Record<string, string> = {}) {
  const o = await wharfCommand([...args, "-c", configPath], {
    env: { RUST_BACKTRACE: "0", NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1", ...env },
    stdin: "null",
  }).output();
  const r: Run = {
    code: o.code,
    stdout: dec.decode(o.stdout),
    stderr: wharfStderr(dec.decode(o.stderr)),
  };
  assert.doesNotMatch(r.stderr, /KV limit/, r.stderr);
  return r;
}

const lines = (s: string) => s.split("\n").filter((l) => l !== "");

/** Plain mode: at least two progress lines matching `progress`, no \r, the summary last. */
function assertPlain(r: Run, progress: RegExp, summary: RegExp): string[] {
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.ok(!r.stdout.includes("\r"), "no carriage return off a terminal");
  const all = lines(r.stdout);
  const shown = all.filter((l) => progress.test(l));
  assert.ok(shown.length >= 2, `periodic lines expected:\n${r.stdout}`);
  assert.match(all[all.length - 1], summary);
  return shown;
}

interface JsonLine {
  type: string;
  command: string;
  [k: string]: unknown;
}

/** --json: every line parses; progress events (done never going back), then one summary. */
function assertJson(r: Run, command: string): { events: JsonLine[]; summary: JsonLine } {
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const all = lines(r.stdout).map((l) => JSON.parse(l) as JsonLine);
  assert.ok(all.every((e) => e.command === command), r.stdout);
  const events = all.filter((e) => e.type === "progress");
  assert.ok(events.length >= 1, r.stdout);
  for (const e of events) {
    assert.equal(typeof e.unit, "string");
    assert.equal(typeof e.done, "number");
    assert.ok(e.total === null || typeof e.total === "number");
    assert.equal(typeof e.elapsed_secs, "number");
  }
  const summary = all[all.length - 1];
  assert.equal(summary.type, "summary", r.stdout);
  assert.equal(all.filter((e) => e.type === "summary").length, 1);
  assert.equal(typeof summary.line, "string");
  assert.equal(typeof summary.elapsed_secs, "number");
  return { events, summary };
}

/** Per phase, `done` never goes back. */
function assertMonotonic(events: JsonLine[]): void {
  const last = new Map<string, number>();
  for (const e of events) {
    const key = `${e.phase ?? ""}/${e.unit}`;
    assert.ok((e.done as number) >= (last.get(key) ?? 0), JSON.stringify(e));
    last.set(key, e.done as number);
  }
}

/** --quiet: exactly the summary line. */
function assertQuiet(r: Run, summary: RegExp): void {
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(lines(r.stdout).length, 1, r.stdout);
  assert.match(r.stdout.trim(), summary);
}

const NAMESPACES = 8;

async function withRegistry(fn: (s: TestServer) => Promise<void>, extra = ""): Promise<void> {
  const s = await startServer({
    config:
      `[global.scrub]\ngrace_secs = 0\n\n[repository.keep.retention_policy]\nrules = ["top_pushed(1)"]\n${extra}`,
  });
  try {
    for (let i = 0; i < NAMESPACES; i++) {
      await pushImage(s.url, `keep/app${i}`, "old");
      await pushImage(s.url, `keep/app${i}`, "new");
    }
    // The jobs the pushes queued are done: a batch's jobs are all its own.
    await drainQueues(s.url);
    await fn(s);
  } finally {
    await s.stop();
    await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  ...serverTestOpts,
  name:
    "reindex and scan: periodic lines, JSON events and a summary, --quiet; the batch is recorded",
  fn: () =>
    withRegistry(async (s) => {
      const progress = new RegExp(`^reindex: \\d+/${NAMESPACES} namespaces \\(\\d+%\\) · `);
      const summary = new RegExp(
        `^reindex: ${NAMESPACES} namespace\\(s\\), ${
          2 * NAMESPACES
        } layer\\(s\\) in [\\d.]+ s; queued ${2 * NAMESPACES}$`,
      );
      const plain = assertPlain(
        await cli(s.configPath, ["reindex", "--force"], EVERY_STEP),
        progress,
        summary,
      );
      assert.match(plain[plain.length - 1], new RegExp(`^reindex: ${NAMESPACES}/${NAMESPACES} `));
      assert.match(plain[plain.length - 1], /16 layer\(s\), 16 queued/);

      // By default a quick run prints no progress line off a terminal: the items and the summary.
      const quick = await cli(s.configPath, ["reindex", "--force", "--dry-run"]);
      assert.equal(quick.code, 0, quick.stderr);
      assert.equal(lines(quick.stdout).filter((l) => progress.test(l)).length, 0, quick.stdout);
      assert.equal(lines(quick.stdout).filter((l) => l.startsWith("would index ")).length, 16);
      assert.match(quick.stdout, /in [\d.]+ s; would queue 16\n$/);

      const json = assertJson(
        await cli(s.configPath, ["reindex", "--force", "--dry-run", "--json"], EVERY_STEP),
        "reindex",
      );
      assertMonotonic(json.events);
      const last = json.events[json.events.length - 1];
      assert.deepEqual([last.unit, last.done, last.total], ["namespaces", NAMESPACES, NAMESPACES]);
      assert.deepEqual(
        [json.summary.namespaces, json.summary.layers, json.summary.queued, json.summary.dry_run],
        [NAMESPACES, 2 * NAMESPACES, 2 * NAMESPACES, true],
      );
      // Items are events of their own, so standard output stays JSON.
      const all = lines(
        (await cli(s.configPath, ["reindex", "--force", "--dry-run", "--json"]))
          .stdout,
      ).map((l) => JSON.parse(l));
      assert.equal(all.filter((e) => e.type === "line").length, 16);
      // At most one event a second by default (the first at once).
      const events = all.filter((e) => e.type === "progress").length;
      assert.ok(
        events >= 1 && events <= 1 + Math.ceil(all[all.length - 1].elapsed_secs),
        `${events} events`,
      );

      assertQuiet(
        await cli(s.configPath, ["reindex", "--force", "--dry-run", "--quiet"]),
        /^reindex: 8 namespace\(s\), 16 layer\(s\) in [\d.]+ s; would queue 16$/,
      );

      // One namespace: its walk is 1 of 1.
      const one = assertJson(
        await cli(
          s.configPath,
          ["reindex", "--force", "--namespace", "keep/app3", "--json"],
          EVERY_STEP,
        ),
        "reindex",
      );
      assert.equal(one.summary.namespaces, 1);
      assert.equal(one.events[one.events.length - 1].total, 1);

      // scan --rescan
      const scanProgress = new RegExp(
        `^scan: \\d+/${NAMESPACES} namespaces \\(\\d+%\\) · \\d+ image`,
      );
      assertPlain(
        await cli(s.configPath, ["scan", "--rescan"], EVERY_STEP),
        scanProgress,
        /^scan: queued 16 image\(s\) in [\d.]+ s$/,
      );
      const scanJson = assertJson(
        await cli(s.configPath, ["scan", "--rescan", "--dry-run", "--json"], EVERY_STEP),
        "scan",
      );
      assertMonotonic(scanJson.events);
      assert.deepEqual([scanJson.summary.queued, scanJson.summary.dry_run], [16, true]);
      assertQuiet(
        await cli(s.configPath, ["scan", "--rescan", "--dry-run", "-q"]),
        /^scan: would queue 16 image\(s\) in [\d.]+ s$/,
      );

      // The real runs queued batches the server's Jobs page shows.
      const index = await (await fetch(`${s.url}/v2/_svc/jobs/progress?queue=index`)).json();
      const reindex = index.runs.find((r: { total: number }) => r.total === 16);
      assert.ok(reindex, JSON.stringify(index));
      assert.equal(reindex.label, "every layer of every namespace");
      assert.equal(reindex.cause, "reindex command");
      const scan = await (await fetch(`${s.url}/v2/_svc/jobs/progress?queue=scan`)).json();
      assert.ok(
        scan.runs.some((r: { kind: string; total: number; cause: string }) =>
          r.kind === "rescan" && r.total === 16 && r.cause === "scan --rescan command"
        ),
        JSON.stringify(scan),
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "scrub and prune: phases and namespaces, JSON events and a summary, --quiet",
  fn: () =>
    withRegistry(async (s) => {
      // Something to reclaim: blobs nothing references.
      const junk = await pushImage(s.url, "junk/app", "x");
      for (
        const path of [`manifests/${junk.digest}`, `blobs/${junk.layer}`, `blobs/${junk.config}`]
      ) {
        const del = await fetch(`${s.url}/v2/junk/app/${path}`, { method: "DELETE" });
        await del.body?.cancel();
        assert.equal(del.status, 202, path);
      }

      const json = assertJson(
        await cli(s.configPath, ["scrub", "--dry-run", "--json"], EVERY_STEP),
        "scrub",
      );
      const phases = [...new Set(json.events.map((e) => e.phase))];
      for (const p of ["references", "blobs", "reclaim", "uploads"]) {
        assert.ok(phases.includes(p), phases.join());
      }
      const reclaim = json.events.filter((e) => e.phase === "reclaim");
      assert.ok(reclaim.every((e) => typeof e.bytes === "number" && e.bytes_total !== undefined));
      assert.equal(json.summary.dry_run, true);
      assert.equal(typeof json.summary.scanned, "number");
      assert.match(json.summary.line as string, /^scrub \(dry run\): \d+ blob\(s\) reclaimable/);

      assertPlain(
        await cli(s.configPath, ["scrub", "--dry-run"], EVERY_STEP),
        /^scrub: (references|blobs|reclaim|reports|usage|uploads|namespaces|pulls) \d+/,
        /^scrub \(dry run\): .* keys\/objects in [\d.]+s/,
      );
      assertQuiet(
        await cli(s.configPath, ["scrub", "--quiet"]),
        /^scrub: [1-9]\d* blob\(s\) reclaimed \(\d+ bytes\), .* in [\d.]+s/,
      );

      // prune: every namespace key is walked (those of keep/ judged), of all there are.
      const dry = assertPlain(
        await cli(s.configPath, ["prune", "--dry-run"], EVERY_STEP),
        /^prune: \d+\/\d+ namespaces \(\d+%\) · \d+ tag\(s\) judged, \d+ to delete/,
        /^prune: 8 namespace\(s\), 16 tag\(s\); kept 8, would delete 8 tag\(s\) and 8 manifest\(s\).* in [\d.]+ s$/,
      );
      assert.match(
        dry[dry.length - 1],
        /^prune: (\d+)\/\1 namespaces \(100%\) · 16 tag\(s\) judged, 8 to delete/,
      );
      const pj = assertJson(
        await cli(s.configPath, ["prune", "--dry-run", "--json"], EVERY_STEP),
        "prune",
      );
      assertMonotonic(pj.events);
      const pend = pj.events[pj.events.length - 1];
      assert.ok(
        (pend.total as number) >= NAMESPACES && pend.done === pend.total,
        JSON.stringify(pend),
      );
      assert.deepEqual([pj.summary.deleted, pj.summary.kept, pj.summary.dry_run], [8, 8, true]);
      assert.equal(pj.events.filter((e) => e.type === "progress").length >= 2, true);
      assert.equal(
        lines((await cli(s.configPath, ["prune", "--dry-run", "--json"])).stdout)
          .map((l) => JSON.parse(l)).filter((e) => e.type === "line").length,
        16,
      );
      assertQuiet(
        await cli(s.configPath, ["prune", "--quiet"]),
        /^prune: 8 namespace\(s\), 16 tag\(s\); kept 8, deleted 8 tag\(s\) and 8 manifest\(s\)/,
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name:
    "sync: tags checked of those to check and bytes, each run's line, a summary; --json; --quiet",
  fn: async () => {
    const up = await startServer();
    const s = await startServer({
      config: `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${up.url}"\n`,
    });
    try {
      for (let i = 0; i < 6; i++) {
        await pushImage(up.url, "team/app", `v${i}`, {
          layer: enc.encode(`layer ${i} `.repeat(500)),
        });
      }
      // The sync entry is the command's only: the server schedules none of its own.
      const config = join(s.dataDir, "with-sync.toml");
      await Deno.writeTextFile(
        config,
        (await Deno.readTextFile(s.configPath)) +
          `[[repository."hub".sync]]\nnamespaces = ["team/app"]\ninterval_secs = 3600\n`,
      );
      const first = assertPlain(
        await cli(config, ["sync"], EVERY_STEP),
        /^sync: hub#0 \d+(\/6)? tags/,
        /^sync: 1 run\(s\), 0 not ok; fetched 6 tag\(s\), 12 blob\(s\) \([\d.]+ KiB\) in [\d.]+ s$/,
      );
      assert.match(
        first[first.length - 1],
        /^sync: hub#0 6\/6 tags \(100%\) · [\d.]+ KiB · 6 fetched/,
      );
      const run = await cli(config, ["sync"], EVERY_STEP);
      assert.match(
        run.stdout,
        /^sync hub#0 \(team\/app\): ok; fetched 0 tag\(s\), 6 unchanged, 0 pruned, 0 blob\(s\) fetched in [\d.]+ s$/m,
      );

      await pushImage(up.url, "team/app", "v6");
      const json = assertJson(await cli(config, ["sync", "--json"], EVERY_STEP), "sync");
      assertMonotonic(json.events);
      assert.ok(json.events.every((e) => e.phase === "hub#0" && e.unit === "tags"));
      const end = json.events[json.events.length - 1];
      assert.deepEqual([end.done, end.total], [7, 7]);
      assert.ok((end.bytes as number) > 0);
      const results = lines((await cli(config, ["sync", "--json"])).stdout).map((l) =>
        JSON.parse(l)
      )
        .filter((e) => e.type === "result");
      assert.equal(results.length, 1);
      assert.equal(results[0].repository, "hub");
      assert.equal(results[0].outcome, "ok");
      assert.equal(json.summary.runs, 1);
      assert.equal(json.summary.tags_fetched, 1);

      // --quiet: the run's line (its own summary) and the command's.
      const quiet = await cli(config, ["sync", "--quiet"]);
      assert.equal(quiet.code, 0, quiet.stderr);
      const ql = lines(quiet.stdout);
      assert.equal(ql.length, 2, quiet.stdout);
      assert.match(ql[0], /^sync hub#0 \(team\/app\): ok; /);
      assert.match(ql[1], /^sync: 1 run\(s\), 0 not ok; fetched 0 tag\(s\)/);
    } finally {
      await s.stop();
      await up.stop();
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "advisories fetch: ecosystems and bytes of the download, each outcome, a summary",
  fn: async () => {
    const advisory = JSON.stringify({ id: "DEBIAN-CVE-2024-1", modified: "2024-06-01T00:00:00Z" });
    // Stored (uncompressed): what advisories fetch verifies before keeping it.
    const zip = zipOf(
      { "DEBIAN-CVE-2024-1.json": enc.encode(advisory + " ".repeat(300_000)) },
      { deflate: false },
    );
    // Served in 16 KiB pieces, so the download reports its bytes as they come.
    const source = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (r) => {
      if (!new URL(r.url).pathname.endsWith("/all.zip")) return new Response("no", { status: 404 });
      if (r.headers.get("if-none-match") === '"v1"') return new Response(null, { status: 304 });
      let at = 0;
      return new Response(
        new ReadableStream({
          pull(c) {
            if (at >= zip.length) return c.close();
            c.enqueue(zip.slice(at, at + 16384));
            at += 16384;
          },
        }),
        { headers: { "content-length": String(zip.length), etag: '"v1"' } },
      );
    });
    const s = await startServer({
      config: `[scan]\nadvisories_url = "http://127.0.0.1:${source.addr.port}"\n`,
    });
    try {
      const dir = (n: number) => join(s.dataDir, `osv${n}`);
      const args = (
        n: number,
      ) => [
        "advisories",
        "fetch",
        "--dir",
        dir(n),
        "--ecosystem",
        "Debian",
        "--ecosystem",
        "Alpine",
      ];
      const json = assertJson(
        await cli(s.configPath, [...args(1), "--json"], EVERY_STEP),
        "advisories fetch",
      );
      assertMonotonic(json.events.filter((e) => e.phase === "Debian"));
      const debian = json.events.filter((e) => e.phase === "Debian");
      assert.ok(debian.length >= 3, JSON.stringify(debian));
      assert.ok(debian.every((e) => e.unit === "ecosystems" && e.done === 0 && e.total === 2));
      assert.equal(debian[debian.length - 1].bytes, zip.length);
      assert.equal(debian[debian.length - 1].bytes_total, zip.length);
      assert.ok(json.events.some((e) => e.phase === "Alpine" && e.done === 1));
      const all = lines((await cli(s.configPath, [...args(2), "--json"])).stdout).map((l) =>
        JSON.parse(l)
      );
      assert.deepEqual(all.filter((e) => e.type === "result").map((e) => e.ecosystem), [
        "Debian",
        "Alpine",
      ]);
      assert.match(
        json.summary.line as string,
        /^advisories fetch: 2 updated, 0 unchanged, 0 failed; [\d.]+ MiB in [\d.]+ s/,
      );

      const plain = assertPlain(
        await cli(s.configPath, args(3), EVERY_STEP),
        /^advisories fetch: (Debian|Alpine) \d\/2 ecosystems \(\d+%\) · [\d.]+ (B|KiB)( of [\d.]+ KiB)?/,
        /^advisories fetch: 2 updated, 0 unchanged, 0 failed; /,
      );
      assert.ok(plain.some((l) => / of 29\d KiB/.test(l)), plain.join("\n"));
      const again = await cli(s.configPath, [...args(3), "--quiet"]);
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(lines(again.stdout).map((l) => l.replace(/; .*/, "")), [
        "Debian: unchanged",
        "Alpine: unchanged",
        "advisories fetch: 0 updated, 2 unchanged, 0 failed",
      ]);
    } finally {
      await s.stop();
      await source.shutdown();
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name:
    "a terminal gets one line rewritten in place, then the summary; misplaced flags are refused",
  fn: () =>
    withRegistry(async (s) => {
      const l = launchOf(["reindex", "--force", "--dry-run", "-c", s.configPath]);
      const line = [l.command, ...l.args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
      const o = await new Deno.Command("script", {
        args: ["-qec", line, "/dev/null"],
        cwd: l.cwd,
        env: { NO_COLOR: "1", COLUMNS: "100", WHARF_PROGRESS_INTERVAL_SECS: "0" },
        stdin: "null",
      }).output();
      const out = dec.decode(o.stdout);
      assert.equal(o.code, 0, out);
      // Each redraw returns to the line's start and clears what is left of the old one.
      const redraws = out.split("\r").filter((p) => /^reindex: \d+\/8 namespaces/.test(p));
      assert.ok(redraws.length >= 2, JSON.stringify(out));
      assert.ok(
        redraws.every((p) => p.includes("\x1b[K") && !p.includes("\n")),
        JSON.stringify(out),
      );
      // The items scroll above it; the progress line is cleared before the summary.
      const CLEAR = "\r\x1b[K";
      assert.match(
        out.replaceAll(CLEAR, "<clear>"),
        /<clear>would index sha256:[0-9a-f]{64} \(keep\/app0\)\r\n/,
      );
      assert.match(
        out.replaceAll(CLEAR, "<clear>"),
        /<clear>reindex: 8 namespace\(s\), 16 layer\(s\) in [\d.]+ s; would queue 16\r\n$/,
      );

      const wrong = await cli(s.configPath, ["verify", "--json"]);
      assert.equal(wrong.code, 2);
      assert.match(
        wrong.stderr,
        /^wharf: --json is an option of reindex, scan, scrub, sync, prune, advisories only/,
      );
      const both = await cli(s.configPath, ["scrub", "--json", "--quiet"]);
      assert.equal(both.code, 2);
      assert.equal(both.stderr, "wharf: --quiet and --json exclude each other\n");
      const badNs = await cli(s.configPath, ["reindex", "--namespace", "Not/Valid"]);
      assert.equal(badNs.code, 2);
      assert.match(badNs.stderr, /--namespace Not\/Valid is not a repository name/);
    }),
});
