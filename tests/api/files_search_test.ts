// Registry-wide file search over HTTP: one file in images of three namespaces (one hidden from
// the caller by policy), by sha256, exact path and basename; paging with `next` and Link; a
// deleted manifest leaving the answers; and the 404 rules for malformed queries.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { join } from "node:path";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { paxTarOf } from "../helpers/pax_tar.ts";
import { MAX_PATH } from "../../lib/index/file_search.ts";

const CONFIG = `
[global.job_queue]
poll_interval_ms = 100
[global.scrub]
grace_secs = 0
[global.access_policy]
default = "allow"
rules = ['request.action == "get-blob" && request.namespace == "hidden/app"']
`;

const push = (s: TestServer, ns: string, tag: string, tars: Uint8Array[]) =>
  pushTarImage(s.url, ns, tag, tars, { ns, tag });

type Row = { namespace: string; manifest: string; tags: string[]; layer: string; path: string };
const rows = (b: { results: Row[] }) =>
  b.results.map((r) => `${r.namespace} ${r.manifest} ${r.tags.join(",")} ${r.layer} ${r.path}`)
    .sort();

Deno.test({
  ...serverTestOpts,
  name: "file search: by sha256, path and name across namespaces, policy-filtered, paged",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const content = "shared=true\n";
      const sha = createHash("sha256").update(content).digest("hex");
      const base = tarOf([{ path: "etc", type: "5" }, { path: "etc/shared.conf", data: content }]);
      const extra = tarOf([{ path: "opt/shared.conf", data: content }, {
        path: "opt/other",
        data: "o",
      }]);
      const a = await push(s, "one/app", "v1", [base]);
      const b = await push(s, "one/app", "v2", [base, extra]);
      const c = await push(s, "two/app", "v1", [base]);
      await push(s, "hidden/app", "v1", [base]);
      const L = a.layers[0], L2 = b.layers[1];
      const want = [
        `one/app ${a.digest} v1 ${L} etc/shared.conf`,
        `one/app ${b.digest} v2 ${L} etc/shared.conf`,
        `one/app ${b.digest} v2 ${L2} opt/shared.conf`,
        `two/app ${c.digest} v1 ${L} etc/shared.conf`,
      ].sort();
      // The index jobs run in the background: wait until every layer is searchable.
      let got: string[] = [];
      for (let i = 0; i < 300; i++) {
        const r = await req(s, `/v2/_svc/files/search?sha256=${sha}`);
        assert.equal(r.status, 200);
        got = rows(await r.json());
        if (got.length === want.length) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.deepEqual(got, want, "hidden/app is left out (no get-blob there)");
      // sha256: prefix and upper case are accepted
      const up = await req(s, `/v2/_svc/files/search?sha256=sha256:${sha.toUpperCase()}`);
      assert.deepEqual(rows(await up.json()), want);
      // exact path (a leading / is ignored)
      const byPath = await (await req(s, "/v2/_svc/files/search?path=/etc/shared.conf")).json();
      assert.deepEqual(rows(byPath), want.filter((w) => w.endsWith("etc/shared.conf")));
      // basename
      const byName = await (await req(s, "/v2/_svc/files/search?name=shared.conf")).json();
      assert.deepEqual(rows(byName), want);
      assert.deepEqual(
        (await (await req(s, "/v2/_svc/files/search?name=nothing")).json()).results,
        [],
      );

      // paging: one (layer, path) hit per page
      const p1 = await req(s, `/v2/_svc/files/search?sha256=${sha}&n=1`);
      const b1 = await p1.json();
      assert.ok(b1.next, "a next cursor");
      const link = p1.headers.get("link")!;
      assert.match(link, /rel="next"/);
      const p2 = await req(s, link.slice(1, link.indexOf(">")));
      const b2 = await p2.json();
      assert.equal(b2.next, undefined);
      assert.deepEqual([...rows(b1), ...rows(b2)].sort(), want);

      // b's image report exists before it is deleted (scrub drops it with the manifest's bytes)
      const reportDir = join(s.dataDir, "blobs", "derived", "reports", ...b.digest.split(":"));
      for (let i = 0; i < 300; i++) {
        const r = await req(s, `/v2/one/app/_svc/vulnerabilities/${b.digest}`);
        await r.body?.cancel();
        if (r.status === 200) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.ok((await Deno.stat(reportDir)).isDirectory);

      // a deleted manifest leaves the answers at once
      const del = await req(s, `/v2/one/app/manifests/${b.digest}`, { method: "DELETE" });
      assert.equal(del.status, 202);
      const after = await (await req(s, `/v2/_svc/files/search?sha256=${sha}`)).json();
      assert.deepEqual(rows(after), want.filter((w) => !w.includes(b.digest)));

      // ...and once its only layer L2 is unowned and scrubbed, its file-index keys, index
      // record, listing files and b's report go with the bytes; L (still used) keeps its own.
      const delBlob = await req(s, `/v2/one/app/blobs/${L2}`, { method: "DELETE" });
      assert.equal(delBlob.status, 202);
      const scrub = await runCli(s, "scrub");
      assert.equal(scrub.code, 0, scrub.stderr);
      const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
      try {
        const keysOf = async (prefix: Deno.KvKey) => {
          const out: Deno.KvKey[] = [];
          for await (const e of kv.list({ prefix })) out.push(e.key);
          return out;
        };
        const shaKeys = await keysOf(["fsha", sha]);
        assert.ok(shaKeys.length > 0 && shaKeys.every((k) => k[2] === L), String(shaKeys));
        assert.deepEqual(await keysOf(["fpath", "opt/shared.conf"]), []);
        assert.deepEqual(await keysOf(["fname", "other"]), []);
        assert.equal((await kv.get(["layeridx", L2])).value, null);
        assert.notEqual((await kv.get(["layeridx", L])).value, null);
        assert.equal((await kv.get(["scanrep", b.digest])).value, null);
      } finally {
        kv.close();
      }
      const gone = async (p: string) => {
        try {
          await Deno.stat(p);
          return false;
        } catch (e) {
          return e instanceof Deno.errors.NotFound;
        }
      };
      assert.ok(await gone(join(s.dataDir, "blobs", "derived", "index", ...L2.split(":"))));
      assert.ok(!(await gone(join(s.dataDir, "blobs", "derived", "index", ...L.split(":")))));
      assert.ok(await gone(reportDir));
      const afterScrub = await (await req(s, "/v2/_svc/files/search?path=opt/shared.conf")).json();
      assert.deepEqual(afterScrub.results, []);

      // malformed queries: 404 NAME_UNKNOWN
      for (
        const q of [
          "",
          `?sha256=${sha}&name=x`,
          "?sha256=abc",
          "?name=a/b",
          "?name=",
          "?path=../etc",
          `?sha256=${sha}&n=0`,
          `?sha256=${sha}&n=-1`,
          `?sha256=${sha}&next=%00%01`,
          `?sha256=${sha}&sha256=${sha}`,
        ]
      ) {
        await assertErrorCode(await req(s, `/v2/_svc/files/search${q}`), 404, "NAME_UNKNOWN");
      }
      const post = await req(s, `/v2/_svc/files/search?sha256=${sha}`, { method: "POST" });
      assert.equal(post.status, 400);
      await post.body?.cancel();
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "file search: names of NULs, long non-ASCII and 4 KiB paths are entered and found; " +
    "overlong and odd queries answer 404 or nothing, never 500",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const nuls = "\0".repeat(1000); // KV escapes each NUL: 2,000 bytes as a key part
      const accents = "é".repeat(1024); // 2 KiB of UTF-8
      const long = "d/" + "日".repeat(1364); // 4,094 bytes: keyed by its hash
      const tooLong = "x".repeat(MAX_PATH + 1); // never entered
      const img = await push(s, "odd/app", "v1", [
        paxTarOf([
          { name: nuls, data: "a" },
          { name: `etc/${accents}`, data: "b" },
          { name: long, data: "c" },
          { name: tooLong, data: "d" },
          { name: "etc/plain", data: "e" },
        ]),
      ]);
      const search = (q: string) => req(s, `/v2/_svc/files/search?${q}`);
      const hits = async (q: string) => {
        const r = await search(q);
        assert.equal(r.status, 200, q.slice(0, 80));
        return (await r.json()).results.map((x: Row) => x.path) as string[];
      };
      // The index job runs in the background (it failed on the NULs before: nothing was found).
      for (let i = 0; i < 300 && (await hits("name=plain")).length === 0; i++) {
        await new Promise((res) => setTimeout(res, 100));
      }
      const p = (v: string) => encodeURIComponent(v);
      assert.deepEqual(await hits(`path=${p(nuls)}`), [nuls]);
      assert.deepEqual(await hits(`name=${p(nuls)}`), [nuls]);
      assert.deepEqual(await hits(`path=${p(`etc/${accents}`)}`), [`etc/${accents}`]);
      assert.deepEqual(await hits(`name=${p(accents)}`), [`etc/${accents}`]);
      assert.deepEqual(await hits(`path=${p(long)}`), [long]);
      assert.deepEqual(await hits(`name=${p(long.slice(2))}`), [long]);
      const sha = createHash("sha256").update("c").digest("hex");
      assert.deepEqual(await hits(`sha256=${sha}`), [long]);
      const r = await (await search(`path=${p(long)}`)).json();
      assert.equal(r.results[0].layer, img.layers[0]);
      // Odd queries with nothing to find: an empty answer.
      for (
        const q of [
          `path=${p("é".repeat(1024))}`, // 500 before: the read key was too large
          `path=${p("\0".repeat(2000))}`,
          `name=${p("日".repeat(1365))}`,
          "path=%FF%FE%C0", // invalid UTF-8 decodes to U+FFFD
          "name=%00",
          "path=a%0D%0Ab",
        ]
      ) assert.deepEqual(await hits(q), [], q.slice(0, 40));
      // Longer than any entered path, or not a path: 404 NAME_UNKNOWN.
      for (
        const q of [
          `path=${p(tooLong)}`,
          `name=${p(tooLong)}`,
          `path=${p("日".repeat(1366))}`,
          "path=a/../b",
          "path=/",
        ]
      ) await assertErrorCode(await search(q), 404, "NAME_UNKNOWN");
      // the server is up and indexing went through without a failed job
      const failed = await (await req(s, "/v2/_svc/jobs/failed?queue=index")).json();
      assert.deepEqual(failed.failed, []);
    }),
});
