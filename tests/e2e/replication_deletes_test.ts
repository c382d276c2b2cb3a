// Replicated deletes against Debian's docker-registry (distribution 2.8), which deletes manifests
// by digest only (a tag DELETE answers 400 DIGEST_INVALID) or, with `storage.delete.enabled:
// false`, not at all (405 UNSUPPORTED): a tag whose digest another local tag still needs is kept
// there as `tag-delete-unsupported` (never retried), the last tag of a digest deletes the digest,
// a digest delete deletes it; reconcile with prune takes the same path; and a three-site chain
// A → B (Wharf) → docker-registry carries a delete made on A. The queues and the failed list
// end empty.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { pushImage, runCli, type TestServer, withServer } from "../helpers/server.ts";
import { distributionMissing, startDistribution } from "./_distribution.ts";
import { until } from "../helpers/until.ts";

const skipReason = distributionMissing();
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

function downstream(name: string, url: string): string {
  return `
[[repository."team".downstream]]
name = "${name}"
url = "${url}"
mode = "event"
connect_timeout_secs = 2
read_timeout_secs = 10
`;
}

const QUEUE = `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 100
backoff_max_ms = 1000
max_attempts = 5
lease_secs = 3
`;

const ACCEPT = "application/vnd.oci.image.manifest.v1+json";

async function remoteDigest(url: string, repo: string, ref: string): Promise<string | null> {
  const r = await fetch(`${url}/v2/${repo}/manifests/${ref}`, {
    method: "HEAD",
    headers: { accept: ACCEPT },
  });
  await r.body?.cancel();
  return r.status === 200 ? r.headers.get("docker-content-digest") : null;
}

/** Tags the manifest `digest` of `ns` also as `tag` (same bytes: same digest). */
async function tagAlso(s: TestServer, ns: string, body: Uint8Array, tag: string): Promise<void> {
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": ACCEPT },
    body: body as BodyInit,
  });
  assert.equal(r.status, 201);
  await r.body?.cancel();
}

async function del(s: TestServer, ns: string, ref: string): Promise<void> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, { method: "DELETE" });
  assert.equal(r.status, 202, `DELETE ${ns}/${ref}`);
  await r.body?.cancel();
}

interface Status {
  downstreams: {
    name: string;
    pending: number;
    failed: number;
    outcomes: Record<string, number>;
    supports: { tag_delete: boolean | null; digest_delete: boolean | null };
    last_error: { outcome: string; message: string } | null;
    health: string;
  }[];
  syncs: unknown[];
}

async function status(s: TestServer, name: string) {
  const r = await req(s, "/v2/_svc/replication/status");
  assert.equal(r.status, 200);
  const body = await r.json() as Status;
  const d = body.downstreams.find((x) => x.name === name);
  assert.ok(d, `downstream ${name} in the status`);
  return d;
}

async function settled(s: TestServer): Promise<void> {
  await until("the replication queue drained", async () => {
    const r = await (await req(s, "/v2/_svc/jobs/list?queue=replication")).json();
    return r.jobs.length === 0;
  });
  const f = await (await req(s, "/v2/_svc/jobs/failed?queue=replication")).json();
  assert.deepEqual(f.failed, [], "nothing dead-lettered");
}

/** Pushes x (tags a, b: one digest) and y (tag c); waits until all three are downstream. */
async function seed(s: TestServer, distUrl: string) {
  const x = await pushImage(s.url, "team/app", "a");
  await tagAlso(s, "team/app", x.body, "b");
  const y = await pushImage(s.url, "team/app", "c");
  await until(
    "a, b, c downstream",
    async () =>
      (await remoteDigest(distUrl, "team/app", "a")) === x.digest &&
      (await remoteDigest(distUrl, "team/app", "b")) === x.digest &&
      (await remoteDigest(distUrl, "team/app", "c")) === y.digest,
  );
  await settled(s);
  return { x, y };
}

Deno.test({
  ...base,
  name: "replicated deletes to docker-registry: by digest where a tag cannot go, none retried",
  fn: async () => {
    const dist = await startDistribution();
    try {
      await withServer({ config: QUEUE + downstream("dist", dist.url) }, async (s) => {
        const { x, y } = await seed(s, dist.url);
        // a's digest still has b here: the downstream keeps the manifest, once, not retried
        await del(s, "team/app", "a");
        await until(
          "the outcome recorded",
          async () => (await status(s, "dist")).outcomes.unsupported === 1,
        );
        await settled(s);
        let d = await status(s, "dist");
        assert.equal(d.outcomes.failed, 0, "no failed run, so no retry");
        assert.equal(d.last_error?.outcome, "tag-delete-unsupported");
        assert.match(d.last_error!.message, /team\/app:a kept on dist.*local tag team\/app:b/);
        assert.equal(d.supports.tag_delete, false);
        assert.equal(d.health, "ok", "an unsupported delete is not a failing downstream");
        assert.equal(await remoteDigest(dist.url, "team/app", "b"), x.digest);
        assert.equal(await remoteDigest(dist.url, "team/app", x.digest), x.digest);
        // the last tag of x: deleted there by digest, which takes a with it
        await del(s, "team/app", "b");
        await until(
          "x gone downstream",
          async () => (await remoteDigest(dist.url, "team/app", x.digest)) === null,
        );
        assert.equal(await remoteDigest(dist.url, "team/app", "a"), null);
        assert.equal(await remoteDigest(dist.url, "team/app", "b"), null);
        // a delete by digest
        await del(s, "team/app", y.digest);
        await until(
          "y gone downstream",
          async () => (await remoteDigest(dist.url, "team/app", y.digest)) === null,
        );
        await settled(s);
        d = await status(s, "dist");
        assert.deepEqual(d.supports, { tag_delete: false, digest_delete: true });
        assert.equal(d.outcomes.deleted, 2);
        assert.equal(d.outcomes.unsupported, 1);
        assert.equal(d.outcomes.failed, 0);
        assert.equal(d.pending, 0);
        assert.equal(d.failed, 0);
        // the learned capability sends the next tag delete straight to HEAD + digest DELETE
        const z = await pushImage(s.url, "team/app", "d");
        await until(
          "d downstream",
          async () => (await remoteDigest(dist.url, "team/app", "d")) === z.digest,
        );
        await del(s, "team/app", "d");
        await until(
          "z gone downstream",
          async () => (await remoteDigest(dist.url, "team/app", z.digest)) === null,
        );
        await settled(s);
        const metrics = await (await req(s, "/metrics")).text();
        assert.match(
          metrics,
          /wharf_replication_jobs_total\{downstream="dist",outcome="tag-delete-unsupported"\} 1/,
        );
        assert.match(
          metrics,
          /wharf_replication_outcomes\{downstream="dist",outcome="unsupported"\} 1/,
        );
        assert.match(metrics, /wharf_replication_pending_jobs\{downstream="dist"\} 0/);
        assert.match(metrics, /wharf_replication_failed_jobs\{downstream="dist"\} 0/);
      });
    } finally {
      await dist.stop();
    }
  },
});

Deno.test({
  ...base,
  name: "replicated deletes to docker-registry with deletes disabled: unsupported at once",
  fn: async () => {
    const dist = await startDistribution({ deleteEnabled: false });
    try {
      await withServer({ config: QUEUE + downstream("dist", dist.url) }, async (s) => {
        const { x, y } = await seed(s, dist.url);
        // one at a time: whether a's digest is still needed here depends on b
        let n = 0;
        for (const ref of ["a", "b", y.digest]) {
          await del(s, "team/app", ref);
          n++;
          await until(
            `outcome ${n} recorded`,
            async () => (await status(s, "dist")).outcomes.unsupported === n,
          );
          const e = (await status(s, "dist")).last_error!;
          assert.equal(e.outcome, ref === "a" ? "tag-delete-unsupported" : "delete-unsupported");
        }
        await settled(s);
        const d = await status(s, "dist");
        assert.equal(d.outcomes.failed, 0, "no failed run, so no retry");
        assert.equal(d.outcomes.deleted, 0);
        assert.deepEqual(d.supports, { tag_delete: false, digest_delete: false });
        assert.equal(d.last_error?.outcome, "delete-unsupported");
        assert.match(d.last_error!.message, /405.*UNSUPPORTED/);
        // the downstream keeps what it cannot delete; the local deletes stand
        assert.equal(await remoteDigest(dist.url, "team/app", x.digest), x.digest);
        assert.equal(await remoteDigest(dist.url, "team/app", y.digest), y.digest);
        const local = await req(s, `/v2/team/app/manifests/${x.digest}`, { method: "HEAD" });
        await local.body?.cancel();
        assert.equal(local.status, 200, "x's revision stays here (only its tags were deleted)");
        const gone = await req(s, `/v2/team/app/manifests/${y.digest}`, { method: "HEAD" });
        await gone.body?.cancel();
        assert.equal(gone.status, 404);
      });
    } finally {
      await dist.stop();
    }
  },
});

Deno.test({
  ...base,
  name: "a three-site chain A -> B (Wharf) -> docker-registry carries a delete made on A",
  fn: async () => {
    const dist = await startDistribution();
    try {
      await withServer({ config: QUEUE + downstream("dist", dist.url) }, async (b) => {
        await withServer({ config: QUEUE + downstream("b", b.url) }, async (a) => {
          const x = await pushImage(a.url, "team/chain", "v1");
          const y = await pushImage(a.url, "team/chain", "v2");
          await until(
            "both on docker-registry",
            async () =>
              (await remoteDigest(dist.url, "team/chain", "v1")) === x.digest &&
              (await remoteDigest(dist.url, "team/chain", "v2")) === y.digest,
            60_000,
          );
          await del(a, "team/chain", "v1");
          await until(
            "v1's digest gone on docker-registry",
            async () => (await remoteDigest(dist.url, "team/chain", x.digest)) === null,
            60_000,
          );
          assert.equal(await remoteDigest(dist.url, "team/chain", "v2"), y.digest);
          const onB = await req(b, "/v2/team/chain/manifests/v1", { method: "HEAD" });
          await onB.body?.cancel();
          assert.equal(onB.status, 404, "deleted on B too");
          await settled(a);
          await settled(b);
          const sa = await status(a, "b");
          assert.equal(sa.supports.tag_delete, true, "a Wharf deletes tags");
          assert.equal((await status(b, "dist")).outcomes.deleted, 1);
        });
      });
    } finally {
      await dist.stop();
    }
  },
});

Deno.test({
  ...base,
  name: "reconcile with prune against docker-registry deletes by digest through the same path",
  fn: async () => {
    const dist = await startDistribution();
    try {
      const cfg = QUEUE + `
[[repository."team".downstream]]
name = "dist"
url = "${dist.url}"
mode = "reconcile"
prune = true
`;
      await withServer({ config: cfg }, async (s) => {
        const x = await pushImage(s.url, "team/app", "v1");
        const z = await pushImage(s.url, "team/app", "old");
        const first = await runCli(s, "replicate");
        assert.equal(first.code, 0, first.stderr);
        await until(
          "both downstream",
          async () =>
            (await remoteDigest(dist.url, "team/app", "v1")) === x.digest &&
            (await remoteDigest(dist.url, "team/app", "old")) === z.digest,
        );
        await settled(s);
        // here: old's tag goes (mode reconcile: no event job); there: a tag behind Wharf's back
        await del(s, "team/app", "old");
        const put = await fetch(`${dist.url}/v2/team/app/manifests/extra`, {
          method: "PUT",
          headers: { "content-type": ACCEPT },
          body: x.body as BodyInit,
        });
        await put.body?.cancel();
        assert.equal(put.status, 201);
        const run = await runCli(s, "replicate");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout + run.stderr, /2 delete/);
        await until(
          "old's digest gone downstream",
          async () => (await remoteDigest(dist.url, "team/app", z.digest)) === null,
        );
        await until("both outcomes", async () => {
          const d = await status(s, "dist");
          return d.outcomes.unsupported === 1 && d.outcomes.deleted === 1;
        });
        await settled(s);
        // extra names v1's digest, which a local tag needs: kept, once, not retried
        assert.equal(await remoteDigest(dist.url, "team/app", "extra"), x.digest);
        assert.equal(await remoteDigest(dist.url, "team/app", "v1"), x.digest);
        const d = await status(s, "dist");
        assert.equal(d.outcomes.failed, 0);
        assert.equal(d.last_error?.outcome, "tag-delete-unsupported");
      });
    } finally {
      await dist.stop();
    }
  },
});
