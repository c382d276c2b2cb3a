// SPEC §Extension endpoints (jobs rows), §Job, §Failed job, Job moves, Job administration 1–3:
// the pending and failed listings with paging, retry and delete, the 404/400 rules for
// malformed queries, the CEL actions with request.queue, and `main.ts worker` draining a
// queue of the server's KV from another process.
import assert from "node:assert/strict";
import { join } from "node:path";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { unique } from "../helpers/oci_content.ts";

const KEY_RE = /^[0-9a-f]{16}-[0-9a-f-]{36}$/;
const ISO_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function config(up: FakeRegistry, cacheConcurrency: number, extra = ""): string {
  return `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 200
max_attempts = 2
[global.job_queue.concurrency]
cache = ${cacheConcurrency}
${extra}
[[repository."hub".upstream]]
url = "${up.url}"
connect_timeout_secs = 2
read_timeout_secs = 5
`;
}

async function getJson(s: TestServer, path: string): Promise<Record<string, unknown>> {
  const r = await req(s, path);
  const text = await r.text();
  assert.equal(r.status, 200, `${path}: ${text}`);
  return JSON.parse(text);
}

type Job = Record<string, unknown>;

/** Queues one cache job per blob: a ranged GET of an uncached blob queues it at once. */
async function queueFills(s: TestServer, up: FakeRegistry, n: number): Promise<string[]> {
  const digests = [];
  for (let i = 0; i < n; i++) {
    const d = up.addBlob("library/app", unique(`blob ${i}`));
    const r = await req(s, `/v2/hub/library/app/blobs/${d}`, { headers: { Range: "bytes=0-3" } });
    assert.equal(r.status, 206);
    await r.body?.cancel();
    digests.push(d);
  }
  return digests;
}

function startWorker(args: string[]): Deno.ChildProcess {
  return wharfCommand(["worker", ...args], {
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
  }).spawn();
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

Deno.test(
  "jobs admin API: listings, paging, retry, delete and a separate worker process",
  serverTestOpts,
  async (t) => {
    const up = await FakeRegistry.start();
    try {
      await withServer({ config: config(up, 0) }, async (s) => {
        const digests = await queueFills(s, up, 5);

        await t.step("GET jobs/list: the queued jobs with every SPEC field", async () => {
          const body = await getJson(s, "/v2/_svc/jobs/list");
          const list = body.jobs as Job[];
          assert.equal(list.length, 5);
          assert.equal(body.next, undefined, "no next on the last page");
          for (const j of list) {
            assert.deepEqual(Object.keys(j).sort(), [
              "attempts",
              "created_at",
              "id",
              "kind",
              "lock_key",
              "max_attempts",
              "not_before",
              "storage_key",
            ]);
            assert.match(String(j.storage_key), KEY_RE);
            assert.match(String(j.id), /^[0-9a-f-]{36}$/);
            assert.equal(j.kind, "fill-blob");
            assert.equal(j.attempts, 0);
            assert.equal(j.max_attempts, 2);
            assert.match(String(j.created_at), ISO_RE);
            assert.match(String(j.not_before), ISO_RE);
            assert.equal(
              Date.parse(String(j.not_before)),
              parseInt(String(j.storage_key).slice(0, 16), 16),
              "not_before is the key's time prefix",
            );
          }
          assert.deepEqual(
            list.map((j) => j.lock_key).sort(),
            digests.map((d) => `hub/library/app@${d}`).sort(),
          );
          // The default queue is cache; the others are empty and separate.
          assert.deepEqual(await getJson(s, "/v2/_svc/jobs/list?queue=cache"), body);
          for (const q of ["replication", "scan", "index"]) {
            assert.deepEqual(await getJson(s, `/v2/_svc/jobs/list?queue=${q}`), { jobs: [] });
            assert.deepEqual(await getJson(s, `/v2/_svc/jobs/failed?queue=${q}`), { failed: [] });
          }
          // Enqueueing the same lock key again is a no-op.
          const again = await req(s, `/v2/hub/library/app/blobs/${digests[0]}`, {
            headers: { Range: "bytes=0-1" },
          });
          await again.body?.cancel();
          assert.equal(((await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[]).length, 5);
        });

        await t.step("paging: n and after = next walk every job once, in key order", async () => {
          const seen: string[] = [];
          let after = "";
          for (let pages = 0; pages < 10; pages++) {
            const body = await getJson(s, `/v2/_svc/jobs/list?n=2${after}`);
            seen.push(...(body.jobs as Job[]).map((j) => String(j.storage_key)));
            if (body.next === undefined) break;
            assert.equal(body.next, seen[seen.length - 1]);
            after = `&after=${body.next}`;
          }
          assert.equal(seen.length, 5);
          assert.deepEqual(seen, [...seen].sort());
          assert.deepEqual(await getJson(s, "/v2/_svc/jobs/list?n=0"), { jobs: [] });
          const last = seen[seen.length - 1];
          assert.deepEqual(await getJson(s, `/v2/_svc/jobs/list?after=${last}`), { jobs: [] });
        });

        await t.step("malformed listing queries are 404, never defaulted", async () => {
          for (
            const q of [
              "queue=bogus",
              "queue=",
              "queue=CACHE",
              "n=abc",
              "n=-1",
              "n=1.5",
              "n=",
              "n=1&n=2",
              "queue=cache&queue=scan",
              "after=not-a-key",
              "after=",
            ]
          ) {
            for (const set of ["list", "failed"]) {
              await assertErrorCode(await req(s, `/v2/_svc/jobs/${set}?${q}`), 404, "NAME_UNKNOWN");
            }
          }
        });

        await t.step("DELETE jobs/pending: 204 once, then 404; malformed → 400", async () => {
          const [first] = (await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[];
          const key = String(first.storage_key);
          const del = () =>
            req(s, `/v2/_svc/jobs/pending?key=${key}&queue=cache`, { method: "DELETE" });
          const r = await del();
          assert.equal(r.status, 204);
          assert.equal(await r.text(), "");
          await assertErrorCode(await del(), 404, "NAME_UNKNOWN");
          assert.equal(((await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[]).length, 4);
          // The deleted job's lock key is free again: the blob can be queued anew.
          const re = await req(
            s,
            `/v2/hub/library/app/blobs/${String(first.lock_key).split("@")[1]}`,
            {
              headers: { Range: "bytes=0-1" },
            },
          );
          await re.body?.cancel();
          assert.equal(((await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[]).length, 5);
          for (
            const [method, q] of [
              ["DELETE", "pending?queue=cache"],
              ["DELETE", "pending?key=garbage"],
              ["DELETE", `pending?key=${key}&queue=bogus`],
              ["DELETE", `pending?key=${key}&key=${key}`],
              ["DELETE", `failed?key=`],
              ["POST", "failed?queue=cache"],
              ["POST", "failed?key=xyz"],
              ["POST", `failed?key=${key}&queue=nope`],
            ]
          ) {
            await assertErrorCode(
              await req(s, `/v2/_svc/jobs/${q}`, { method }),
              400,
              "UNSUPPORTED",
            );
          }
          const missing = "0000000000000000-00000000-0000-0000-0000-000000000000";
          await assertErrorCode(
            await req(s, `/v2/_svc/jobs/failed?key=${missing}`, { method: "POST" }),
            404,
            "NAME_UNKNOWN",
          );
          await assertErrorCode(
            await req(s, `/v2/_svc/jobs/failed?key=${missing}`, { method: "DELETE" }),
            404,
            "NAME_UNKNOWN",
          );
          // Methods the table does not name.
          await assertErrorCode(
            await req(s, "/v2/_svc/jobs/list", { method: "POST" }),
            400,
            "UNSUPPORTED",
          );
          await assertErrorCode(await req(s, "/v2/_svc/jobs/pending"), 400, "UNSUPPORTED");
        });

        await t.step("metrics: pending per queue, enqueue dedup counted", async () => {
          const text = await (await req(s, "/metrics")).text();
          assert.match(text, /wharf_jobs_pending\{queue="cache"\} 5\n/);
          assert.match(text, /wharf_jobs_pending\{queue="replication"\} 0\n/);
          assert.match(text, /wharf_jobs_enqueued_total\{queue="cache",result="dedup"\} [1-9]/);
          assert.match(text, /wharf_jobs_failed\{queue="cache"\} 0\n/);
        });

        await t.step(
          "main.ts worker --queue cache: dead-letters poisoned fills; retry and delete",
          async () => {
            // Every blob GET now answers other bytes: each fill fails its digest check.
            up.fault({ method: "GET", path: "/blobs/" }, { replaceBody: "poison" });
            const workerCfg = join(s.dataDir, "worker.toml");
            const text = (await Deno.readTextFile(s.configPath)).replace("cache = 0", "cache = 2");
            await Deno.writeTextFile(workerCfg, text);
            const w = startWorker(["--queue", "cache", "-c", workerCfg]);
            try {
              await until("all jobs dead-lettered", async () => {
                const failed = (await getJson(s, "/v2/_svc/jobs/failed")).failed as Job[];
                return failed.length === 5;
              });
            } finally {
              w.kill("SIGTERM");
              const out = await w.output();
              assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
              assert.match(new TextDecoder().decode(out.stdout), /worker draining cache/);
            }
            assert.deepEqual((await getJson(s, "/v2/_svc/jobs/list")).jobs, []);
            const failed = (await getJson(s, "/v2/_svc/jobs/failed")).failed as Job[];
            for (const f of failed) {
              assert.equal(f.not_before, undefined);
              assert.match(String(f.failed_at), ISO_RE);
              assert.match(String(f.last_error), /hash/);
              assert.equal(f.attempts, 1, "a digest mismatch dead-letters without retries");
            }
            const page = await getJson(s, "/v2/_svc/jobs/failed?n=3");
            assert.equal((page.failed as Job[]).length, 3);
            assert.equal(page.next, (page.failed as Job[])[2].storage_key);

            const key = String(failed[0].storage_key);
            const retry = await req(s, `/v2/_svc/jobs/failed?key=${key}&queue=cache`, {
              method: "POST",
            });
            assert.equal(retry.status, 204);
            await assertErrorCode(
              await req(s, `/v2/_svc/jobs/failed?key=${key}`, { method: "POST" }),
              404,
              "NAME_UNKNOWN",
            );
            const pending = (await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[];
            assert.equal(pending.length, 1);
            assert.equal(pending[0].id, failed[0].id);
            assert.equal(pending[0].attempts, 0);
            const del = await req(s, `/v2/_svc/jobs/failed?key=${failed[1].storage_key}`, {
              method: "DELETE",
            });
            assert.equal(del.status, 204);
            assert.equal(((await getJson(s, "/v2/_svc/jobs/failed")).failed as Job[]).length, 3);
            // With the honest upstream back, the retried job fills its blob.
            up.clearFaults();
            const w2 = startWorker(["--queue", "cache", "-c", workerCfg]);
            try {
              await until(
                "the retried job to finish",
                async () => ((await getJson(s, "/v2/_svc/jobs/list")).jobs as Job[]).length === 0,
              );
            } finally {
              w2.kill("SIGTERM");
              await w2.output();
            }
            up.resetLog();
            const digest = String(failed[0].lock_key).split("@")[1];
            const r = await req(s, `/v2/hub/library/app/blobs/${digest}`);
            assert.equal(r.status, 200);
            await r.body?.cancel();
            assert.equal(up.requests.length, 0, "the worker cached the blob");
          },
        );
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "jobs admin API: CEL actions list-jobs, list-failed-jobs, retry-job, delete-job see request.queue",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const policy = `
[global.access_policy]
default = "deny"
rules = [
  'request.action == "list-jobs" && request.queue == "cache"',
  'request.action == "list-failed-jobs" && request.queue == "scan"',
  'request.action == "delete-job" && request.queue == "index"',
  'request.action == "retry-job" && request.queue == "replication"',
]
`;
      await withServer({ config: config(up, 0, policy) }, async (s) => {
        const status = async (method: string, path: string) => {
          const r = await req(s, path, { method });
          await r.body?.cancel();
          return r.status;
        };
        const key = "0000000000000000-00000000-0000-0000-0000-000000000000";
        assert.equal(await status("GET", "/v2/_svc/jobs/list"), 200, "default queue is cache");
        assert.equal(await status("GET", "/v2/_svc/jobs/list?queue=cache"), 200);
        assert.equal(await status("GET", "/v2/_svc/jobs/list?queue=scan"), 401);
        assert.equal(await status("GET", "/v2/_svc/jobs/failed?queue=scan"), 200);
        assert.equal(await status("GET", "/v2/_svc/jobs/failed"), 401);
        assert.equal(await status("DELETE", `/v2/_svc/jobs/pending?key=${key}&queue=index`), 404);
        assert.equal(await status("DELETE", `/v2/_svc/jobs/failed?key=${key}&queue=index`), 404);
        assert.equal(await status("DELETE", `/v2/_svc/jobs/pending?key=${key}&queue=cache`), 401);
        assert.equal(
          await status("POST", `/v2/_svc/jobs/failed?key=${key}&queue=replication`),
          404,
        );
        assert.equal(await status("POST", `/v2/_svc/jobs/failed?key=${key}&queue=index`), 401);
      });
    } finally {
      await up.close();
    }
  },
);
