// Issue 26 part 1: storage quotas per repository. Usage counts each distinct digest once per
// repository (links and revisions of all its namespaces), is enforced at upload completion,
// mount and manifest PUT (403 DENIED naming the numbers), lowered by deletes, stays exact under
// concurrent pushes and deletes, and is recounted (drift repaired and counted) by scrub.
import assert from "node:assert/strict";
import { join } from "node:path";
import { postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { formatBytes } from "../../lib/quota/mod.ts";

const enc = new TextEncoder();
const bytes = (label: string, n: number) => {
  const b = new Uint8Array(n);
  b.set(enc.encode(label).slice(0, n));
  return b;
};

async function push(s: TestServer, ns: string, data: Uint8Array): Promise<Response> {
  return await postBlob(s, ns, await sha256(data), data);
}

async function usageOf(s: TestServer, repo: string): Promise<Record<string, unknown>> {
  const r = await req(s, "/v2/_svc/repositories/list");
  assert.equal(r.status, 200);
  const body = await r.json() as { repositories: Record<string, unknown>[] };
  const row = body.repositories.find((x) => x.name === repo);
  assert.ok(row, `${repo} listed: ${JSON.stringify(body)}`);
  return row;
}

async function manifestPut(s: TestServer, ns: string, tag: string, blobs: Uint8Array[]) {
  const [config, ...layers] = await Promise.all(
    blobs.map(async (b) => ({ digest: await sha256(b), size: b.length })),
  );
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: layers.map((l) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar", ...l })),
  }));
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body,
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
  });
  return { r, body, digest: await sha256(body) };
}

async function scrub(s: TestServer): Promise<string> {
  const out = await runCli(s, "scrub");
  assert.equal(out.code, 0, out.stdout + out.stderr);
  return out.stdout + out.stderr;
}

const drift = (out: string) => {
  const m = out.match(/usage of (\d+) repositor\(ies\) recounted \((\d+) drifted by (\d+) bytes\)/);
  assert.ok(m, out);
  return { recounted: Number(m[1]), drifted: Number(m[2]), bytes: Number(m[3]) };
};

const CONFIG = `
[global.scrub]
grace_secs = 0

[global.quota]
default_max_bytes = 1000000

[[global.quota.namespace]]
pattern = "ci-.*"
max_bytes = 3000

[repository."team"]
[repository."team".quota]
max_bytes = 10000
`;

Deno.test(
  "quota: enforced at upload, mount and manifest PUT; deletes free; shared digests once",
  serverTestOpts,
  async (t) => {
    await withServer({ config: CONFIG }, async (s) => {
      const L1 = bytes("layer-1", 4000);
      const L2 = bytes("layer-2", 4000);
      const L3 = bytes("layer-3", 4000);

      // The listing shows repositories holding a manifest: one referencing nothing stored (missing
      // references are allowed by default) puts each in it, adding only its own bytes.
      let M = 0;
      const listed = async (ns: string) => {
        const { r, body } = await manifestPut(s, ns, "base", [bytes("absent", 10)]);
        await r.body?.cancel();
        assert.equal(r.status, 201);
        M = body.length;
      };
      await listed("team/base");
      await listed("other/base");
      await listed("ci-17/base");

      await t.step("a layer shared by two namespaces of the repository counts once", async () => {
        assert.equal((await usageOf(s, "team")).used_bytes, M);
        assert.equal((await push(s, "team/app", L1)).status, 201);
        assert.equal((await push(s, "team/db", L1)).status, 201);
        assert.equal((await push(s, "team/db", L1)).status, 201); // a re-upload adds nothing
        const row = await usageOf(s, "team");
        assert.equal(row.used_bytes, M + 4000);
        assert.equal(row.quota_bytes, 10000);
      });

      await t.step("an upload past the quota is 403 DENIED naming the numbers", async () => {
        assert.equal((await push(s, "team/app", L2)).status, 201);
        const r = await push(s, "team/db", L3);
        assert.equal(r.status, 403);
        const e = (await r.json()).errors[0];
        assert.equal(e.code, "DENIED");
        assert.equal(
          e.detail,
          `quota exceeded: team uses ${formatBytes(M + 8000)} of ${formatBytes(10000)}; ` +
            `this push needs ${formatBytes(4000)} more`,
        );
        assert.equal((await usageOf(s, "team")).used_bytes, M + 8000);
        // Not linked: the refused blob is not readable in the namespace.
        const head = await req(s, `/v2/team/db/blobs/${await sha256(L3)}`, { method: "HEAD" });
        await head.body?.cancel();
        assert.equal(head.status, 404);
      });

      await t.step(
        "a mount past the quota is 403; a mount of a digest held adds nothing",
        async () => {
          assert.equal((await push(s, "other/x", L3)).status, 201);
          const d3 = await sha256(L3);
          let r = await req(s, `/v2/team/app/blobs/uploads/?mount=${d3}&from=other/x`, {
            method: "POST",
          });
          assert.equal(r.status, 403, await r.text());
          const d1 = await sha256(L1);
          r = await req(s, `/v2/team/web/blobs/uploads/?mount=${d1}&from=team/app`, {
            method: "POST",
          });
          await r.body?.cancel();
          assert.equal(r.status, 201);
          assert.equal((await usageOf(s, "team")).used_bytes, M + 8000);
        },
      );

      await t.step("a manifest PUT past the quota is 403 DENIED", async () => {
        const cfgBlob = bytes("cfg", 1900 - M);
        assert.equal((await push(s, "team/app", cfgBlob)).status, 201);
        assert.equal((await usageOf(s, "team")).used_bytes, 9900);
        const { r } = await manifestPut(s, "team/app", "v1", [cfgBlob, L1]);
        assert.equal(r.status, 403);
        assert.match((await r.json()).errors[0].detail, /^quota exceeded: team uses 9\.7 KiB/);
      });

      await t.step("deleting frees: blob deletes lower usage, the push then fits", async () => {
        for (const ns of ["team/app", "team/db", "team/web"]) {
          const r = await req(s, `/v2/${ns}/blobs/${await sha256(L1)}`, { method: "DELETE" });
          await r.body?.cancel();
          assert.equal(r.status, 202);
        }
        assert.equal((await usageOf(s, "team")).used_bytes, 5900);
        assert.equal((await push(s, "team/db", L3)).status, 201);
        assert.equal((await usageOf(s, "team")).used_bytes, 9900);
      });

      await t.step("a manifest counts its own bytes; deleting it frees them", async () => {
        const r0 = await req(s, `/v2/team/db/blobs/${await sha256(L3)}`, { method: "DELETE" });
        await r0.body?.cancel();
        const cfgBlob = bytes("cfg", 1900 - M);
        const { r, body, digest } = await manifestPut(s, "team/app", "v1", [cfgBlob, L2]);
        await r.body?.cancel();
        assert.equal(r.status, 201);
        assert.equal((await usageOf(s, "team")).used_bytes, 5900 + body.length);
        // The same manifest in a second namespace of the repository counts once (missing
        // references are allowed by default, so team/db needs no links of its own).
        const again = await manifestPut(s, "team/db", "v1", [cfgBlob, L2]);
        await again.r.body?.cancel();
        assert.equal(again.r.status, 201);
        assert.equal((await usageOf(s, "team")).used_bytes, 5900 + body.length);
        const d = await req(s, `/v2/team/app/manifests/${digest}`, { method: "DELETE" });
        await d.body?.cancel();
        assert.equal(d.status, 202);
        assert.equal((await usageOf(s, "team")).used_bytes, 5900 + body.length); // team/db holds it
        const d2 = await req(s, `/v2/team/db/manifests/${digest}`, { method: "DELETE" });
        await d2.body?.cancel();
        assert.equal((await usageOf(s, "team")).used_bytes, 5900);
      });

      await t.step("namespace patterns and the global default apply elsewhere", async () => {
        assert.equal((await usageOf(s, "other")).quota_bytes, 1000000);
        assert.equal((await push(s, "ci-17/build", bytes("a", 2000))).status, 201);
        const r = await push(s, "ci-17/build", bytes("b", 3000 - M - 1999));
        assert.equal(r.status, 403);
        assert.match((await r.json()).errors[0].detail, /quota exceeded: ci-17 uses/);
      });

      await t.step("two teams sharing a layer count it once each", async () => {
        await listed("red/base");
        await listed("blue/base");
        const shared = bytes("shared-base", 1500);
        for (const ns of ["red/a", "red/b", "blue/a"]) {
          assert.equal((await push(s, ns, shared)).status, 201);
        }
        assert.equal((await usageOf(s, "red")).used_bytes, M + 1500);
        assert.equal((await usageOf(s, "blue")).used_bytes, M + 1500);
        for (const ns of ["red/a", "red/b", "blue/a"]) {
          const r = await req(s, `/v2/${ns}/blobs/${await sha256(shared)}`, { method: "DELETE" });
          await r.body?.cancel();
        }
        assert.equal((await usageOf(s, "red")).used_bytes, M);
      });

      await t.step("scrub recounts every repository and finds no drift", async () => {
        const out = await scrub(s);
        const d = drift(out);
        assert.ok(d.recounted >= 5, JSON.stringify(d));
        assert.equal(d.drifted, 0);
        // team/app's config and layer lost their manifests above; other/x and ci-17/build never
        // had one: under a quota, scrub unlinks them (grace_secs = 0 here).
        assert.match(out, /, 4 unreferenced link\(s\) under quota,/);
        assert.equal((await usageOf(s, "team")).used_bytes, M);
      });

      await t.step("scrub repairs and counts drift", async () => {
        const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
        try {
          await kv.set(["usage", "team"], new Deno.KvU64(123n));
        } finally {
          kv.close();
        }
        const d = drift(await scrub(s));
        assert.equal(d.drifted, 1);
        assert.equal(d.bytes, Math.abs(M - 123));
        assert.equal((await usageOf(s, "team")).used_bytes, M);
        assert.equal(drift(await scrub(s)).drifted, 0);
      });
    });
  },
);
