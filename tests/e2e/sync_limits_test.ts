// Scheduled pull sync under pressure, against docker-registry behind a counting proxy: a 429
// with Retry-After is waited out (never hammered); a spent `ratelimit-remaining` stops the run
// as rate-limited and the next run finishes the rest; two servers on one KV run the sync once;
// garbage, truncated or looping tag lists end the run with a clear error and touch nothing
// (prune included), while an honest listing then prunes the tag gone upstream.
import assert from "node:assert/strict";
import { join } from "node:path";
import { runCli, startServer, type TestServer } from "../helpers/server.ts";
import { distributionMissing, startDistribution } from "./_distribution.ts";
import {
  config,
  localTags,
  MANIFEST_ACCEPT,
  NAME,
  populate,
  SELECTED,
  until,
  UpstreamProxy,
} from "./_sync_upstream.ts";

const skipReason = distributionMissing();
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

/** A server without the sync entry (nothing scheduled), and `main.ts sync` with it. */
async function cliSetup(upstream: string, sync = "") {
  const full = config(upstream, sync);
  const s = await startServer({ config: full.slice(0, full.indexOf('[[repository."hub".sync]]')) });
  const path = join(s.dataDir, "with-sync.toml");
  await Deno.writeTextFile(
    path,
    (await Deno.readTextFile(s.configPath)) + full.slice(full.indexOf('[[repository."hub".sync]]')),
  );
  return { s, sync: (args: string[] = []) => runCli({ ...s, configPath: path }, "sync", args) };
}

Deno.test({
  name: "sync: a spent ratelimit-remaining stops the run (rate-limited); a 429 with " +
    "Retry-After is waited for and the next run fetches the rest",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      await populate(dist.url);
      const c = await cliSetup(proxy.url);
      s = c.s;
      // Docker Hub's header: 5 manifest GETs left (one batch of 4 tags and their shared child).
      proxy.tagHeaders = { "ratelimit-remaining": "5;w=21600", "ratelimit-limit": "100;w=21600" };
      const limited = await c.sync();
      assert.equal(limited.code, 1, limited.stdout + limited.stderr);
      assert.match(limited.stdout, /: rate-limited; fetched \d tag\(s\)/);
      assert.match(limited.stdout, /ratelimit-remaining/);
      assert.ok(proxy.count("GET", /\/manifests\/sha256:/) <= 5, "no GET past the budget");
      const first = (await localTags(s)).length;
      assert.ok(first >= 1 && first < 10, `fetched ${first} of 10`);

      proxy.tagHeaders = {};
      let refusedAt = 0;
      proxy.override = (req, path) => {
        if (req.method !== "GET" || !path.endsWith("/tags/list") || refusedAt) return null;
        refusedAt = Date.now();
        return new Response('{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}', {
          status: 429,
          headers: { "retry-after": "2", "content-type": "application/json" },
        });
      };
      const run = await c.sync();
      assert.equal(run.code, 0, run.stdout + run.stderr);
      const again = proxy.seen.filter((x) => x.path.endsWith("/tags/list") && x.at > refusedAt);
      assert.equal(again.length, 1, "asked again once");
      assert.ok(again[0].at - refusedAt >= 1900, `asked again after ${again[0].at - refusedAt} ms`);
      assert.match(
        run.stdout,
        new RegExp(`: ok; fetched ${10 - first} tag\\(s\\), ${first} unchanged`),
      );
      assert.deepEqual(await localTags(s), SELECTED);
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

Deno.test({
  name: "sync: two servers on one KV run a scheduled sync once",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    const servers: TestServer[] = [];
    try {
      const up = await populate(dist.url);
      const cfg = config(proxy.url, "");
      servers.push(await startServer({ config: cfg }));
      servers.push(await startServer({ config: cfg, dataDir: servers[0].dataDir }));
      await until("the sync", async () => (await localTags(servers[1])).length === 10);
      // Give a second run every chance to happen (both polled the cache queue meanwhile).
      await new Promise((r) => setTimeout(r, 2000));
      assert.equal(proxy.count("GET", /\/tags\/list$/), 1);
      for (const t of SELECTED) {
        const d = up.indexes.get(t)!.digest;
        assert.equal(proxy.count("GET", new RegExp(`/manifests/${d}$`)), 1, t);
      }
      for (const d of up.amd64.blobs.keys()) {
        assert.equal(proxy.count("GET", new RegExp(`/blobs/${d}$`)), 1, d);
      }
      const jobs = await (await fetch(`${servers[0].url}/v2/_svc/jobs/list?queue=cache`)).json();
      assert.equal(jobs.jobs.filter((j: { kind: string }) => j.kind === "sync").length, 1);
    } finally {
      for (const s of servers.reverse()) await s.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

const GARBAGE: [string, () => Response, RegExp][] = [
  [
    "an HTML page",
    () =>
      new Response("<html><body>Login</body></html>", { headers: { "content-type": "text/html" } }),
    /page 1 is not JSON/,
  ],
  [
    "a truncated body",
    () =>
      new Response(`{"name":"${NAME}","tags":["v1.0","v1`, {
        headers: { "content-type": "application/json" },
      }),
    /page 1 is not JSON/,
  ],
  [
    "tags that are not an array",
    () => Response.json({ name: NAME, tags: "v1.0" }),
    /"tags" is not an array/,
  ],
  [
    "a tag that is not a string",
    () => Response.json({ name: NAME, tags: ["v1.0", 7] }),
    /tags\[1\] is not a valid tag/,
  ],
  [
    "an invalid tag",
    () => Response.json({ name: NAME, tags: ["v1.0", "../etc"] }),
    /tags\[1\] is not a valid tag/,
  ],
  [
    "pagination that loops",
    () =>
      Response.json({ name: NAME, tags: ["v1.0"] }, {
        headers: { link: `</v2/${NAME}/tags/list?n=1000>; rel="next"` },
      }),
    /pagination loops/,
  ],
  [
    "pagination to another origin",
    () =>
      Response.json({ name: NAME, tags: ["v1.0"] }, {
        headers: { link: `<http://127.0.0.2:1/v2/${NAME}/tags/list?last=v1.0>; rel="next"` },
      }),
    /next page on another origin/,
  ],
  ["a 200 with an empty body", () => new Response(""), /page 1 is not JSON/],
];

Deno.test({
  name: "sync: garbage tag lists end the run with a clear error and change nothing (prune " +
    "included); an honest listing then prunes the tag gone upstream",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      const up = await populate(dist.url);
      const c = await cliSetup(proxy.url, "prune = true");
      s = c.s;
      const first = await c.sync();
      assert.equal(first.code, 0, first.stdout + first.stderr);
      assert.deepEqual(await localTags(s), SELECTED);
      for (const [what, answer, message] of GARBAGE) {
        proxy.override = (req, path) =>
          req.method === "GET" && path.endsWith("/tags/list") ? answer() : null;
        const run = await c.sync();
        assert.equal(run.code, 1, `${what}: ${run.stdout}${run.stderr}`);
        assert.match(run.stdout, /: failed; fetched 0 tag\(s\), 0 unchanged, 0 pruned/, what);
        assert.match(run.stdout, /tag list unusable, nothing changed/, what);
        assert.match(run.stdout, message, what);
        assert.deepEqual(await localTags(s), SELECTED, `${what}: nothing pruned`);
      }
      // An honest listing in two pages (Link: rel="next"): every page is read before prune.
      proxy.override = (req, path) => {
        if (req.method !== "GET" || !path.endsWith("/tags/list")) return null;
        const second = new URL(req.url).searchParams.get("last") === "v1.4";
        return Response.json(
          { name: NAME, tags: SELECTED.slice(second ? 5 : 0, second ? 10 : 5) },
          {
            headers: second ? {} : { link: `</v2/${NAME}/tags/list?last=v1.4&n=5>; rel="next"` },
          },
        );
      };
      const paged = await c.sync();
      assert.equal(paged.code, 0, paged.stdout + paged.stderr);
      assert.match(paged.stdout, /: ok; fetched 0 tag\(s\), 10 unchanged, 0 pruned/);
      proxy.override = null;
      const del = await fetch(
        `${dist.url}/v2/${NAME}/manifests/${up.indexes.get("v1.9")!.digest}`,
        {
          method: "DELETE",
        },
      );
      await del.body?.cancel();
      assert.equal(del.status, 202);
      const pruned = await c.sync();
      assert.equal(pruned.code, 0, pruned.stdout + pruned.stderr);
      assert.match(pruned.stdout, /pruned hub\/team\/app:v1\.9 \(gone upstream\)/);
      assert.match(pruned.stdout, /: ok; fetched 0 tag\(s\), 9 unchanged, 1 pruned/);
      assert.deepEqual(await localTags(s), SELECTED.filter((t) => t !== "v1.9"));
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

Deno.test({
  name: "sync: a tag a client only inspected (manifest cached, blobs not) is completed",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      const up = await populate(dist.url);
      const c = await cliSetup(proxy.url);
      s = c.s;
      // `skopeo inspect`-like: the index and the amd64 manifest, no blob.
      for (const ref of ["v1.0", up.amd64.digest]) {
        const r: Response = await fetch(`${s.url}/v2/hub/${NAME}/manifests/${ref}`, {
          headers: { accept: MANIFEST_ACCEPT },
        });
        await r.body?.cancel();
        assert.equal(r.status, 200);
      }
      const run = await c.sync();
      assert.equal(run.code, 0, run.stdout + run.stderr);
      assert.match(run.stdout, /fetched hub\/team\/app:v1\.0 \(incomplete\)/);
      assert.match(run.stdout, /: ok; fetched 10 tag\(s\), 0 unchanged/);
      proxy.override = () => new Response("down", { status: 502 });
      for (const [d, bytes] of up.amd64.blobs) {
        const r: Response = await fetch(`${s.url}/v2/hub/${NAME}/blobs/${d}`);
        assert.equal(r.status, 200, d);
        assert.deepEqual(new Uint8Array(await r.arrayBuffer()), bytes);
      }
      proxy.override = null;
      const again = await c.sync();
      assert.match(again.stdout, /: ok; fetched 0 tag\(s\), 10 unchanged/);
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

Deno.test({
  name: "sync: an entry added by a config reload gets its first run without a restart",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      await populate(dist.url);
      const full = config(proxy.url, "");
      const at = full.indexOf('[[repository."hub".sync]]');
      s = await startServer({ config: full.slice(0, at) });
      const before = await Deno.readTextFile(s.configPath);
      await Deno.writeTextFile(s.configPath, before + full.slice(at));
      const server = s;
      await until("the reloaded entry's run", async () => (await localTags(server)).length === 10);
      assert.match(s.output(), /config reloaded/);
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});

Deno.test({
  name: "sync: max_tags_per_run bounds each run's fetches; the next runs fetch the rest",
  ...base,
  fn: async () => {
    const dist = await startDistribution();
    const proxy = new UpstreamProxy(dist.url);
    let s: TestServer | null = null;
    try {
      await populate(dist.url);
      const c = await cliSetup(proxy.url, "max_tags_per_run = 3");
      s = c.s;
      for (const [fetched, unchanged] of [[3, 0], [3, 3], [3, 6], [1, 9]]) {
        const run = await c.sync();
        assert.equal(run.code, 0, run.stdout + run.stderr);
        assert.match(
          run.stdout,
          new RegExp(`: ok; fetched ${fetched} tag\\(s\\), ${unchanged} unchanged`),
        );
        if (fetched === 3) assert.match(run.stdout, /max_tags_per_run \(3\) reached/);
        assert.equal((await localTags(s)).length, fetched + unchanged);
      }
    } finally {
      await s?.stop();
      await proxy.close();
      await dist.stop();
    }
  },
});
