// File search by basename pattern (docs/api.md#file-search): `hello*` over the basename keys,
// `*.sh` over the reversed ones, `?` for one character; a pattern without a literal end, or too
// long, is refused; a page reads a bounded number of keys and hands on a cursor; and a layer whose
// file index predates the reversed keys gets them from `main.ts reindex`.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { PATTERN_SCAN_MAX } from "../../lib/index/file_search.ts";

const CONFIG = `
[global.job_queue]
poll_interval_ms = 100
`;

type Row = { namespace: string; path: string };
const paths = (b: { results: Row[] }) => b.results.map((r) => r.path).sort();

async function search(s: TestServer, q: string) {
  const r = await req(s, `/v2/_svc/files/search?${q}`);
  assert.equal(r.status, 200, await r.clone().text());
  return await r.json();
}

async function until(what: string, f: () => Promise<boolean>) {
  for (let i = 0; i < 300; i++) {
    if (await f()) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail(`never: ${what}`);
}

Deno.test({
  ...serverTestOpts,
  name: "file search: basename prefix and glob patterns, bounded pages, refused patterns",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const img = await pushTarImage(s.url, "pat/app", "v1", [tarOf([
        { path: "bin/hello", data: "h" },
        { path: "bin/hello.sh", data: "hs" },
        { path: "opt/run.sh", data: "r" },
        { path: "opt/run.shx", data: "x" },
        { path: "lib/libssl.so.3", data: "l" },
        { path: "lib/libsz.so.2", data: "z" },
        { path: "etc/hell", data: "e" },
      ])]);
      await until("indexed", async () => (await search(s, "name=hello")).results.length === 1);
      // the exact name as before: hello.sh is not `hello`
      assert.deepEqual(paths(await search(s, "name=hello")), ["bin/hello"]);
      assert.deepEqual(paths(await search(s, "name=hello*")), ["bin/hello", "bin/hello.sh"]);
      assert.deepEqual(paths(await search(s, "name=*.sh")), ["bin/hello.sh", "opt/run.sh"]);
      assert.deepEqual(paths(await search(s, "name=lib*.so.?")), [
        "lib/libssl.so.3",
        "lib/libsz.so.2",
      ]);
      assert.deepEqual(paths(await search(s, "name=libs?.so.*")), ["lib/libsz.so.2"]);
      assert.deepEqual(paths(await search(s, `name=${encodeURIComponent("h*l?")}`)), [
        "bin/hello",
        "etc/hell",
      ]);
      // each hit names its image as the exact search does
      const hit = (await search(s, "name=*.shx")).results[0];
      assert.equal(hit.manifest, img.digest);
      assert.deepEqual(hit.tags, ["v1"]);
      // paging a pattern: one hit per page, then the rest
      const p1 = await search(s, "name=*.sh&n=1");
      assert.equal(p1.results.length, 1);
      assert.ok(p1.next);
      const p2 = await search(s, `name=*.sh&n=1&next=${encodeURIComponent(p1.next)}`);
      const rest = [...p2.results];
      let next = p2.next;
      while (next) {
        const p = await search(s, `name=*.sh&n=1&next=${encodeURIComponent(next)}`);
        rest.push(...p.results);
        next = p.next;
      }
      assert.deepEqual(paths({ results: [...p1.results, ...rest] }), [
        "bin/hello.sh",
        "opt/run.sh",
      ]);
      // refused: no literal end, a / in a name, too long
      for (const q of ["*", "*x*", "?", "**", "a/*", "*" + "a".repeat(255)]) {
        await assertErrorCode(
          await req(s, `/v2/_svc/files/search?name=${encodeURIComponent(q)}`),
          404,
          "NAME_UNKNOWN",
        );
      }
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "file search: a pattern page reads a bounded number of keys, then hands on a cursor",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const n = PATTERN_SCAN_MAX + 500;
      const files = Array.from({ length: n }, (_, i) => ({
        path: `d/aa${String(i).padStart(5, "0")}`,
        data: "",
      }));
      files.push({ path: "d/aazz", data: "z" });
      await pushTarImage(s.url, "many/app", "v1", [tarOf(files)]);
      await until("indexed", async () => (await search(s, "name=aazz")).results.length === 1);
      // `aa*z` reads every `aa…` name: the first page stops at the bound without a hit
      const first = await search(s, "name=aa*z");
      assert.deepEqual(first.results, []);
      assert.ok(first.next, "a cursor after the bound");
      const second = await search(s, `name=aa*z&next=${encodeURIComponent(first.next)}`);
      assert.deepEqual(paths(second), ["d/aazz"]);
      assert.equal(second.next, undefined);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "file search: reindex gives a layer indexed before the reversed keys its *.ext search",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const img = await pushTarImage(s.url, "old/app", "v1", [tarOf([
        { path: "bin/tool.sh", data: "t" },
      ])]);
      const layer = img.layers[0];
      await until("indexed", async () => (await search(s, "name=*.sh")).results.length === 1);
      // as a version-2 file index left it: no reversed keys
      const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
      try {
        for await (const e of kv.list({ prefix: ["fnamer"] })) await kv.delete(e.key);
        await kv.set(["fidxdone", layer], { version: 2, files: 1 });
      } finally {
        kv.close();
      }
      assert.deepEqual((await search(s, "name=*.sh")).results, []);
      const r = await runCli(s, "reindex");
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout + r.stderr, /queued 1/);
      await until("reversed keys rewritten", async () =>
        paths(await search(s, "name=*.sh")).join() === "bin/tool.sh");
    }),
});
