// Scheduled pull sync (issue 24 part 2) against Debian's docker-registry as the upstream:
// 30 tags, a regex selecting 10, each a two-platform index of which one platform is wanted.
// The server's scheduled run caches exactly those, byte-exact (checked with the upstream
// stopped); `main.ts sync` refetches a moved tag; a 429 with Retry-After is waited out; a spent
// `ratelimit-remaining` stops the run; two servers on one KV run it once; garbage tag lists
// end the run with a clear error and leave the cache as it was (prune included).
import assert from "node:assert/strict";
import { runCli, startServer, type TestServer } from "../helpers/server.ts";
import { distributionMissing, startDistribution } from "./_distribution.ts";
import {
  config,
  localTags,
  MANIFEST_ACCEPT,
  NAME,
  OTHERS,
  populate,
  pushImage,
  pushIndex,
  SELECTED,
  until,
  type Upstream,
  UpstreamProxy,
} from "./_sync_upstream.ts";

const skipReason = distributionMissing();
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };
const enc = new TextEncoder();

async function get(s: TestServer, path: string, accept = MANIFEST_ACCEPT) {
  const r = await fetch(`${s.url}/v2/hub/${NAME}/${path}`, { headers: { accept } });
  return { status: r.status, bytes: new Uint8Array(await r.arrayBuffer()) };
}

/** With the upstream unreachable, only what was cached can be read. */
async function assertCachedExactly(s: TestServer, up: Upstream): Promise<void> {
  assert.deepEqual(await localTags(s), SELECTED);
  for (const t of SELECTED) {
    const m = await get(s, `manifests/${t}`);
    assert.equal(m.status, 200, t);
    assert.deepEqual(m.bytes, up.indexes.get(t)!.body, `${t} byte-exact`);
  }
  const amd = await get(s, `manifests/${up.amd64.digest}`);
  assert.equal(amd.status, 200);
  assert.deepEqual(amd.bytes, up.amd64.body);
  for (const [d, bytes] of up.amd64.blobs) {
    const b = await get(s, `blobs/${d}`);
    assert.equal(b.status, 200, d);
    assert.deepEqual(b.bytes, bytes, `blob ${d} byte-exact`);
  }
  // The other platform and the unselected tags were never fetched.
  assert.notEqual((await get(s, `manifests/${up.arm64.digest}`)).status, 200);
  for (const d of up.arm64.blobs.keys()) {
    assert.notEqual((await get(s, `blobs/${d}`)).status, 200, d);
  }
  for (const t of OTHERS) assert.notEqual((await get(s, `manifests/${t}`)).status, 200, t);
}

Deno.test({
  name: "sync: the scheduled run caches exactly the selected tags and platform; a moved tag " +
    "is refetched by `main.ts sync`; tags gone upstream stay without prune",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      const up = await populate(dist.url);
      s = await startServer({ config: config(proxy.url, "") });
      await until("the scheduled run", async () => (await localTags(s!)).length === 10);
      // The run is a `cache` job that queued its next run (visible in the jobs admin API).
      await until("the next run queued", async () => {
        const r = await fetch(`${s!.url}/v2/_svc/jobs/list?queue=cache`);
        const jobs = (await r.json()).jobs as {
          kind: string;
          lock_key: string;
          not_before: string;
        }[];
        const next = jobs.find((j) => j.kind === "sync");
        return next?.lock_key === "sync:hub#0" &&
          Date.parse(next.not_before) > Date.now() + 3600_000;
      });
      assert.equal(proxy.count("GET", /\/tags\/list$/), 1);
      // The status view's `syncs` row (GET /v2/_svc/replication/status).
      const status = await (await fetch(`${s.url}/v2/_svc/replication/status`)).json();
      assert.equal(status.syncs.length, 1);
      const row = status.syncs[0];
      assert.equal(row.repository, "hub");
      assert.deepEqual(row.namespaces, [NAME]);
      assert.equal(row.tags_fetched, 10);
      assert.equal(row.last_outcome, "ok");
      assert.equal(row.last_error, null);
      assert.ok(Date.now() - Date.parse(row.last_run) < 60_000, row.last_run);
      assert.ok(Date.parse(row.next_run) - Date.parse(row.last_run) === 86400_000, row.next_run);
      // The same figures in the metrics.
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      const gauge = (name: string) =>
        Number(
          new RegExp(`^${name}\\{repository="hub",entry="0"\\} (\\S+)$`, "m").exec(metrics)?.[1],
        );
      assert.equal(gauge("wharf_sync_tags_fetched"), 10);
      assert.equal(gauge("wharf_sync_failing"), 0);
      assert.equal(gauge("wharf_sync_last_run_timestamp_seconds"), Date.parse(row.last_run) / 1000);
      assert.equal(gauge("wharf_sync_next_run_timestamp_seconds"), Date.parse(row.next_run) / 1000);
      // One upstream GET per selected index, one for the amd64 image, one per amd64 blob.
      for (const t of SELECTED) {
        assert.equal(proxy.count("GET", new RegExp(`/manifests/${up.indexes.get(t)!.digest}$`)), 1);
      }
      assert.equal(proxy.count("GET", new RegExp(`/manifests/${up.amd64.digest}$`)), 1);
      for (const d of up.amd64.blobs.keys()) {
        assert.equal(proxy.count("GET", new RegExp(`/blobs/${d}$`)), 1, d);
      }
      assert.equal(proxy.count(null, /\/manifests\/(dev|v2)/), 0);

      proxy.override = () => new Response("down", { status: 502 });
      await assertCachedExactly(s, up);
      proxy.override = null;

      // v1.3 moves to a new amd64 image; v1.9 disappears upstream (distribution deletes by
      // digest, and v1.9's index is its own).
      const amd64b = await pushImage(dist.url, NAME, "amd64 b", "amd64", [
        enc.encode(`amd64 new layer ${crypto.randomUUID()}`),
      ]);
      const moved = await pushIndex(dist.url, NAME, "v1.3", amd64b, up.arm64);
      const del = await fetch(
        `${dist.url}/v2/${NAME}/manifests/${up.indexes.get("v1.9")!.digest}`,
        {
          method: "DELETE",
        },
      );
      await del.body?.cancel();
      assert.equal(del.status, 202);

      const dry = await runCli(s, "sync", ["--dry-run"]);
      assert.equal(dry.code, 0, dry.stderr + dry.stdout);
      assert.match(dry.stdout, /would fetch hub\/team\/app:v1\.3 \(moved from sha256:/);
      assert.match(dry.stdout, /would fetch 1 tag\(s\), 8 unchanged/);
      // Read with the upstream down: a HEAD of a cached tag otherwise revalidates upstream.
      proxy.override = () => new Response("down", { status: 502 });
      assert.equal(await localDigest(s, "v1.3"), up.indexes.get("v1.3")!.digest);
      proxy.override = null;

      const run = await runCli(s, "sync", ["--repository", "hub"]);
      assert.equal(run.code, 0, run.stderr + run.stdout);
      assert.match(run.stdout, /fetched hub\/team\/app:v1\.3 \(moved from sha256:/);
      assert.match(run.stdout, /: ok; fetched 1 tag\(s\), 8 unchanged, 0 pruned, 2 blob\(s\)/);
      proxy.override = () => new Response("down", { status: 502 });
      const m = await get(s, "manifests/v1.3");
      assert.deepEqual(m.bytes, moved.body);
      for (const [d, bytes] of amd64b.blobs) {
        assert.deepEqual((await get(s, `blobs/${d}`)).bytes, bytes);
      }
      // Without prune, the tag removed upstream stays cached.
      assert.deepEqual(await localTags(s), SELECTED);
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

async function localDigest(s: TestServer, tag: string): Promise<string | null> {
  const r = await fetch(`${s.url}/v2/hub/${NAME}/manifests/${tag}`, {
    method: "HEAD",
    headers: { accept: MANIFEST_ACCEPT },
  });
  await r.body?.cancel();
  return r.status === 200 ? r.headers.get("docker-content-digest") : null;
}

Deno.test({
  name: "sync: a run whose server is killed mid-run resumes after the restart from its cursor",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    let release: (r: Response) => void = () => {};
    try {
      const up = await populate(dist.url);
      // The second batch of tags (v1.4–v1.7) starts once the first one's cursor is saved: its
      // first index GET hangs until the server is killed.
      const hung = up.indexes.get("v1.4")!.digest;
      let reached = false;
      proxy.override = (req, path) => {
        if (req.method !== "GET" || !path.endsWith(`/manifests/${hung}`) || reached) return null;
        reached = true;
        return new Promise<Response>((r) => release = r);
      };
      s = await startServer({ config: config(proxy.url, "") });
      await until("the second batch", () => Promise.resolve(reached));
      const dataDir = s.dataDir;
      await s.kill();
      s = null;
      release(new Response("gone", { status: 502 }));
      proxy.override = null;
      assert.equal(proxy.count("HEAD", /\/manifests\/v1\.0$/), 1);
      s = await startServer({ config: config(proxy.url, ""), dataDir });
      const restarted = s;
      await until("the resumed run", async () => {
        const st = await (await fetch(`${restarted.url}/v2/_svc/replication/status`)).json();
        return st.syncs[0]?.last_run !== null;
      }, 90_000);
      assert.match(s.output(), /sync run resumes/);
      const st = await (await fetch(`${s.url}/v2/_svc/replication/status`)).json();
      // Counts carry over: the first batch's 4 tags, and of the interrupted batch and the rest
      // at least v1.4, v1.8 and v1.9 (v1.5–v1.7 may have been stored before the kill).
      const fetched = st.syncs[0].tags_fetched;
      assert.ok(fetched >= 7 && fetched <= 10, JSON.stringify(st.syncs[0]));
      assert.equal(st.syncs[0].last_outcome, "ok");
      assert.deepEqual(await localTags(s), SELECTED);
      // The first batch was not checked again; the interrupted one was.
      for (const t of ["v1.0", "v1.1", "v1.2", "v1.3"]) {
        assert.equal(proxy.count("HEAD", new RegExp(`/manifests/${t.replace(".", "\\.")}$`)), 1, t);
      }
      assert.equal(proxy.count("HEAD", /\/manifests\/v1\.4$/), 2);
      proxy.override = () => new Response("down", { status: 502 });
      await assertCachedExactly(s, up);
    } finally {
      release(new Response("gone", { status: 502 }));
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});
