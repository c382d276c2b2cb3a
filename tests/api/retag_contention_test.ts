// A namespace under a CI fleet (issue 36): 16 clients retagging 3 tags as fast as they can while
// 4 clients delete other manifests of the same namespace, by digest, and tags of their own. A
// delete checks only what makes it wrong (its revision and the tags naming it), so none of the
// retags touches it: every delete answers 202 at once, never 503, and really removed what it
// named; every retag answers 201. Before, a delete checked the namespace's tag version, which
// every retag rewrites, and answered 503 "manifest delete kept conflicting".
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { distinctManifest, putManifest } from "../helpers/oci_content.ts";
import { withServer } from "../helpers/server.ts";

const NS = "fleet/app";
const RETAGGERS = 16;
const TAGS = ["latest", "stable", "edge"];
const DELETERS = 4;
const DELETES_EACH = 12;
/** No delete may wait anywhere near the commit retry's bound (10 s) on a busy namespace. */
const DELETE_MAX_MS = 5_000;

Deno.test({
  name: "16 retaggers of 3 tags beside deletes of other manifests: every delete lands, 202",
  ...serverTestOpts,
  fn: () =>
    withServer({}, async (s) => {
      // The manifests the deleters remove, pushed by digest (untagged) before the storm.
      const doomed: string[][] = [];
      for (let d = 0; d < DELETERS; d++) {
        const mine: string[] = [];
        for (let i = 0; i < DELETES_EACH; i++) {
          const m = await distinctManifest(`doomed ${d}/${i}`);
          const r = await putManifest(s, NS, m.digest, m.body);
          assert.equal(r.status, 201, await r.text());
          mine.push(m.digest);
        }
        doomed.push(mine);
      }
      const failures: string[] = [];
      let retags = 0;
      let deleting = true;
      const retaggers = Array.from({ length: RETAGGERS }, async (_, c) => {
        for (let n = 0; deleting; n++) {
          const m = await distinctManifest(`retag ${c}/${n}`);
          const r = await putManifest(s, NS, TAGS[(c + n) % TAGS.length], m.body);
          const text = await r.text();
          if (r.status !== 201) failures.push(`retag: ${r.status} ${text.slice(0, 300)}`);
          retags++;
        }
      });
      const slowest: number[] = [];
      const deleters = doomed.map(async (mine, d) => {
        // Let the retaggers get going first.
        while (retags < RETAGGERS) await new Promise((r) => setTimeout(r, 10));
        for (const [i, digest] of mine.entries()) {
          // A tag of its own on the manifest it then deletes: both deletes name what they remove.
          const tag = `gone-${d}-${i}`;
          const put = await putManifest(s, NS, tag, (await distinctManifest(tag)).body);
          await put.body?.cancel();
          for (const [what, path] of [["tag", tag], ["manifest", digest]]) {
            const t0 = performance.now();
            const r = await req(s, `/v2/${NS}/manifests/${path}`, { method: "DELETE" });
            const text = await r.text();
            slowest.push(performance.now() - t0);
            if (r.status !== 202) {
              failures.push(`delete ${what}: ${r.status} ${text.slice(0, 300)}`);
            }
            const after = await req(s, `/v2/${NS}/manifests/${path}`, { method: "HEAD" });
            await after.body?.cancel();
            if (after.status !== 404) failures.push(`${what} ${path} still there: ${after.status}`);
          }
        }
      });
      await Promise.all(deleters);
      const retagsDuringDeletes = retags;
      deleting = false;
      await Promise.all(retaggers);
      assert.deepEqual(failures, []);
      assert.ok(
        retagsDuringDeletes >= 4 * DELETERS * DELETES_EACH,
        `the tags were busy while the deletes ran (${retagsDuringDeletes} retags)`,
      );
      const worst = Math.max(...slowest);
      assert.ok(worst < DELETE_MAX_MS, `a delete took ${worst.toFixed(0)} ms`);
      // The retagged tags all resolve; none of the deleted manifests is listed anywhere.
      const list = await req(s, `/v2/${NS}/tags/list`);
      const tags = (await list.json()).tags as string[];
      assert.deepEqual(tags.sort(), [...TAGS].sort());
      for (const tag of TAGS) {
        const r = await req(s, `/v2/${NS}/manifests/${tag}`, { method: "HEAD" });
        await r.body?.cancel();
        assert.equal(r.status, 200, tag);
      }
    }),
});

Deno.test({
  name: "deletes of the very manifests the retaggers tag (a real conflict) retry until they land",
  ...serverTestOpts,
  fn: () =>
    withServer({}, async (s) => {
      const failures: string[] = [];
      let running = true;
      let retags = 0;
      const retaggers = Array.from({ length: RETAGGERS }, async (_, c) => {
        for (let n = 0; running; n++) {
          const m = await distinctManifest(`hot ${c}/${n}`);
          const r = await putManifest(s, NS, TAGS[(c + n) % TAGS.length], m.body);
          const text = await r.text();
          if (r.status !== 201) failures.push(`retag: ${r.status} ${text.slice(0, 300)}`);
          retags++;
        }
      });
      let landed = 0;
      const deleters = Array.from({ length: DELETERS }, async (_, d) => {
        while (retags < RETAGGERS) await new Promise((r) => setTimeout(r, 10));
        for (let i = 0; i < DELETES_EACH; i++) {
          const tag = TAGS[(d + i) % TAGS.length];
          const head = await req(s, `/v2/${NS}/manifests/${tag}`, { method: "HEAD" });
          await head.body?.cancel();
          const digest = head.headers.get("docker-content-digest");
          if (!digest) continue; // deleted with its manifest by another deleter just now
          const r = await req(s, `/v2/${NS}/manifests/${digest}`, { method: "DELETE" });
          const text = await r.text();
          // 404: another deleter removed it first, which is this delete landing too.
          if (r.status !== 202 && r.status !== 404) {
            failures.push(`delete: ${r.status} ${text.slice(0, 300)}`);
            continue;
          }
          landed++;
          // Nobody pushes that manifest again, so it is gone for good and no tag names it.
          const after = await req(s, `/v2/${NS}/manifests/${digest}`, { method: "HEAD" });
          await after.body?.cancel();
          if (after.status !== 404) failures.push(`${digest} still there: ${after.status}`);
        }
      });
      await Promise.all(deleters);
      running = false;
      await Promise.all(retaggers);
      assert.deepEqual(failures, []);
      assert.ok(landed >= DELETERS * DELETES_EACH / 2, `${landed} deletes landed`);
      const list = await req(s, `/v2/${NS}/tags/list`);
      for (const tag of (await list.json()).tags as string[]) {
        const r = await req(s, `/v2/${NS}/manifests/${tag}`, { method: "HEAD" });
        await r.body?.cancel();
        assert.equal(r.status, 200, `${tag} is listed but names no manifest`);
      }
    }),
});
