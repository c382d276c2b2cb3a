// GET /v2/_svc/jobs/progress (issue 37 item 5): long server-side runs and their done/total. A
// reindex of 48 layers queued by `main.ts reindex` is watched while the server's index jobs run
// it (done climbs, never back, to 48 of 48); a reindex of one namespace is a run of its own; an
// advisory change's rescan is a batch of the scan queue named after the snapshot loaded. The
// endpoint is gated by list-jobs with request.queue, and a malformed query is 404.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { runCli, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

interface RunView {
  id: string;
  kind: string;
  queue: string;
  label: string;
  cause: string;
  state: string;
  done: number;
  failed: number;
  total: number | null;
  queued: number;
  started_at: string;
  finished_at: string | null;
}

const QUIET = `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 5

[global.index]
on_push = "none"

[scan]
on_push = false
`;

async function runs(url: string, queue: string): Promise<RunView[]> {
  const r = await fetch(`${url}/v2/_svc/jobs/progress?queue=${queue}`);
  assert.equal(r.status, 200, await r.clone().text());
  assert.equal(r.headers.get("content-type"), "application/json");
  const body = await r.json();
  assert.equal(body.queue, queue);
  return body.runs;
}

async function pushLayers(url: string, namespaces: number, perNamespace: number): Promise<void> {
  for (let n = 0; n < namespaces; n++) {
    for (let i = 0; i < perNamespace; i++) {
      const tar = tarOf([{ path: `etc/app-${n}-${i}.conf`, data: `n=${n} i=${i}\n` }]);
      await pushTarImage(url, `team/ns${n}`, `v${i}`, [tar]);
    }
  }
}

Deno.test({
  ...serverTestOpts,
  name: "jobs progress: a reindex of 48 layers climbs to 48/48 while the index jobs run",
  fn: () =>
    withServer({ config: QUIET }, async (s) => {
      await pushLayers(s.url, 6, 8);
      assert.deepEqual(await runs(s.url, "index"), []);
      const cli = wharfCommand(["reindex", "-c", s.configPath], {
        env: { NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
        stdin: "null",
      }).output();
      const seen: RunView[] = [];
      const deadline = Date.now() + 180_000;
      for (;;) {
        const [v] = await runs(s.url, "index");
        if (v) seen.push(v);
        if (v?.state === "done") break;
        assert.ok(Date.now() < deadline, `no end: ${JSON.stringify(seen.slice(-3))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const out = await cli;
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.match(
        new TextDecoder().decode(out.stdout),
        /^reindex: 6 namespace\(s\), 48 layer\(s\) in [\d.]+ s; queued 48$/m,
      );

      // One run throughout, its done never going back; seen part-way.
      assert.equal(new Set(seen.map((v) => v.id)).size, 1);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].done >= seen[i - 1].done);
      const partWay = seen.filter((v) => v.state !== "done" && v.done < 48);
      assert.ok(partWay.length >= 2, JSON.stringify(seen.map((v) => [v.state, v.done, v.total])));
      assert.ok(
        seen.some((v) => v.state === "running" && v.total === 48 && v.done > 0 && v.done < 48),
        JSON.stringify(seen.map((v) => [v.state, v.done, v.total])),
      );
      const end = seen[seen.length - 1];
      assert.deepEqual(
        [end.kind, end.queue, end.done, end.failed, end.total, end.queued],
        ["reindex", "index", 48, 0, 48, 48],
      );
      assert.equal(end.label, "layers without a current index of every namespace");
      assert.equal(end.cause, "reindex command");
      assert.ok(end.finished_at !== null && end.started_at <= end.finished_at);

      // A reindex of one namespace is a run of its own, listed first; other queues show none.
      const one = await runCli(s, "reindex", ["--force", "--namespace", "team/ns2", "--quiet"]);
      assert.equal(one.code, 0, one.stderr);
      const [latest, earlier] = await runs(s.url, "index");
      assert.equal(latest.label, "every layer of namespace team/ns2");
      assert.equal(latest.total, 8);
      assert.equal(earlier.id, end.id);
      assert.deepEqual(await runs(s.url, "replication"), []);

      // Malformed queries are 404 NAME_UNKNOWN, as the job listings answer them.
      for (const q of ["queue=bogus", "n=1", "queue=index&queue=scan"]) {
        await assertErrorCode(await req(s, `/v2/_svc/jobs/progress?${q}`), 404, "NAME_UNKNOWN");
      }
      const head = await req(s, "/v2/_svc/jobs/progress?queue=index", { method: "HEAD" });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), "");
      const post = await req(s, "/v2/_svc/jobs/progress", { method: "POST" });
      await post.body?.cancel();
      assert.equal(post.status, 400);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "jobs progress: gated by list-jobs with request.queue",
  fn: () =>
    withServer({
      config: `[global.access_policy]
default = "deny"
rules = ['request.action == "list-jobs" && request.queue == "index"']
`,
    }, async (s) => {
      const status = async (path: string) => {
        const r = await req(s, path);
        await r.body?.cancel();
        return r.status;
      };
      assert.equal(await status("/v2/_svc/jobs/progress?queue=index"), 200);
      assert.equal(await status("/v2/_svc/jobs/progress?queue=scan"), 401);
      assert.equal(await status("/v2/_svc/jobs/progress"), 401, "the default queue is cache");
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "jobs progress: an advisory change's rescan is a batch of the scan queue",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-adv-" });
    try {
      await withServer({
        config: QUIET.replace(
          "[scan]\n",
          `[scan]\nadvisories_dir = ${JSON.stringify(adv)}\nreload_interval_secs = 1\n`,
        ),
      }, async (s) => {
        await pushLayers(s.url, 2, 3);
        assert.deepEqual(await runs(s.url, "scan"), []);
        await Deno.mkdir(join(adv, "Debian"));
        await Deno.writeTextFile(
          join(adv, "Debian", "DEBIAN-CVE-2024-1.json"),
          JSON.stringify({
            id: "DEBIAN-CVE-2024-1",
            modified: "2024-06-01T00:00:00Z",
            affected: [{
              package: { ecosystem: "Debian:12", name: "openssl" },
              ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: "3.0.99-1" }] }],
            }],
          }),
        );
        const deadline = Date.now() + 120_000;
        let v: RunView | undefined;
        for (;;) {
          v = (await runs(s.url, "scan")).find((r) => r.cause.startsWith("advisories loaded"));
          if (v?.state === "done") break;
          assert.ok(Date.now() < deadline, JSON.stringify(v));
          await new Promise((r) => setTimeout(r, 200));
        }
        assert.equal(v.kind, "rescan");
        assert.match(v.cause, /^advisories loaded \(snapshot \S+\)$/);
        assert.equal(v.label, "every image of every namespace");
        assert.deepEqual([v.total, v.done + v.failed], [6, 6]);
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});
