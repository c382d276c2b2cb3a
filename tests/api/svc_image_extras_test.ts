// What the UI's manifests list and details need from the `_svc` image routes (docs/api.md): sizes
// and single-image platforms in the revisions listing (additive fields), image reports addressed
// by tag as the diff is, and manifest reads marked as browsing that stay out of pull history.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import {
  distinctManifest,
  jsonBytes,
  OCI_INDEX,
  OCI_MANIFEST,
  putManifestOk,
} from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 3
`;

interface Row {
  digest: string;
  tags: string[];
  size?: number;
  platform?: { os: string; architecture: string; variant?: string };
}

async function manifestJson(s: TestServer, ns: string, ref: string) {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    headers: { accept: `${OCI_MANIFEST}, ${OCI_INDEX}` },
  });
  assert.equal(r.status, 200);
  const bytes = new Uint8Array(await r.arrayBuffer());
  return { bytes, json: JSON.parse(new TextDecoder().decode(bytes)) };
}

async function imageBytes(s: TestServer, ns: string, ref: string): Promise<number> {
  const { bytes, json } = await manifestJson(s, ns, ref);
  return bytes.length + json.config.size +
    json.layers.reduce((n: number, l: { size: number }) => n + l.size, 0);
}

Deno.test({
  ...serverTestOpts,
  name: "revisions listing: each row's pull size and a single image's platform, without a click",
  fn: () =>
    withServer({}, async (s) => {
      const ns = "sz/app";
      const a = await pushTarImage(s.url, ns, "amd", [tarOf([{ path: "a", data: "aaaa" }])]);
      const b = await pushTarImage(s.url, ns, "arm", [
        tarOf([{ path: "b", data: "bbbbbbbb" }]),
        tarOf([{ path: "c", data: "c" }]),
      ], { architecture: "arm", variant: "v7" });
      const index = jsonBytes({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [
          {
            mediaType: OCI_MANIFEST,
            digest: a.digest,
            size: (await manifestJson(s, ns, a.digest)).bytes.length,
            platform: { os: "linux", architecture: "amd64" },
          },
          {
            mediaType: OCI_MANIFEST,
            digest: b.digest,
            size: (await manifestJson(s, ns, b.digest)).bytes.length,
            platform: { os: "linux", architecture: "arm", variant: "v7" },
          },
        ],
      });
      const idx = await putManifestOk(s, ns, "multi", index, OCI_INDEX);
      const indexDigest = idx.headers.get("docker-content-digest")!;
      // a manifest whose config blob is not stored: its size still, no platform, no error
      const bare = await distinctManifest("bare");
      await putManifestOk(s, ns, "bare", bare.body);

      const r = await req(s, `/v2/${ns}/_svc/revisions/list`);
      assert.equal(r.status, 200);
      const rows = new Map(
        ((await r.json()).manifests as Row[]).map((m) => [m.digest, m]),
      );
      const sizeA = await imageBytes(s, ns, "amd"), sizeB = await imageBytes(s, ns, "arm");
      assert.equal(rows.get(a.digest)!.size, sizeA);
      assert.deepEqual(rows.get(a.digest)!.platform, { os: "linux", architecture: "amd64" });
      assert.equal(rows.get(b.digest)!.size, sizeB);
      assert.deepEqual(rows.get(b.digest)!.platform, {
        os: "linux",
        architecture: "arm",
        variant: "v7",
      });
      assert.equal(rows.get(indexDigest)!.size, index.length + sizeA + sizeB);
      assert.equal(rows.get(indexDigest)!.platform, undefined);
      const bareRow = rows.get(bare.digest)!;
      assert.equal(bareRow.platform, undefined);
      const bareJson = JSON.parse(new TextDecoder().decode(bare.body));
      assert.equal(bareRow.size, bare.body.length + bareJson.config.size);
      // asked again (now from the per-digest cache) the answer is the same
      const again = await (await req(s, `/v2/${ns}/_svc/revisions/list`)).json();
      assert.deepEqual(
        new Map((again.manifests as Row[]).map((m) => [m.digest, m])),
        rows,
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "image reports: a tag is accepted wherever a digest is, as the diff does",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const img = await pushTarImage(s.url, "vt/app", "v1", [
        tarOf([{ path: "etc/os-release", data: 'ID=alpine\nVERSION_ID="3.20.1"\n' }]),
      ]);
      let byTag;
      for (let i = 0;; i++) {
        const r = await req(s, "/v2/vt/app/_svc/vulnerabilities/v1");
        if (r.status === 200) {
          byTag = await r.json();
          break;
        }
        assert.equal(r.status, 202, await r.clone().text());
        await r.body?.cancel();
        if (i > 400) assert.fail("report by tag still 202");
        await new Promise((res) => setTimeout(res, 150));
      }
      assert.equal(byTag.digest, img.digest);
      const byDigest = await (await req(s, `/v2/vt/app/_svc/vulnerabilities/${img.digest}`))
        .json();
      assert.deepEqual({ ...byTag, refreshing: false }, { ...byDigest, refreshing: false });
      // a format by tag too
      const csv = await req(s, "/v2/vt/app/_svc/vulnerabilities/v1?format=csv");
      assert.equal(csv.status, 200);
      assert.match(csv.headers.get("content-type")!, /^text\/csv/);
      await csv.body?.cancel();
      await assertErrorCode(
        await req(s, "/v2/vt/app/_svc/vulnerabilities/nope"),
        404,
        "MANIFEST_UNKNOWN",
      );
      // neither a digest nor a tag
      await assertErrorCode(
        await req(s, "/v2/vt/app/_svc/vulnerabilities/a:b"),
        400,
        "DIGEST_INVALID",
      );
      await assertErrorCode(
        await req(s, `/v2/vt/app/_svc/vulnerabilities/${"t".repeat(129)}`),
        400,
        "DIGEST_INVALID",
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "pull history: a manifest read marked X-Svc-No-Pull-Record (the UI's) is not a pull",
  fn: () =>
    withServer({ config: `[global]\nupdate_pull_time = true\n` }, async (s) => {
      await pushTarImage(s.url, "pm/app", "v1", [tarOf([{ path: "a", data: "a" }])]);
      const get = async (headers: Record<string, string>) => {
        const r = await req(s, "/v2/pm/app/manifests/v1", {
          headers: { accept: OCI_MANIFEST, ...headers },
        });
        assert.equal(r.status, 200);
        await r.body?.cancel();
      };
      await get({ "x-svc-no-pull-record": "1" });
      await get({ "x-svc-no-pull-record": "1", "x-svc-no-redirect": "1" });
      await new Promise((res) => setTimeout(res, 300));
      const none = await (await req(s, "/v2/pm/app/_svc/pulls/list?tag=v1")).json();
      assert.deepEqual(none.entries, []);
      const revs = await (await req(s, "/v2/pm/app/_svc/revisions/list")).json();
      assert.equal(revs.manifests[0].last_pulled_at, undefined);
      await get({});
      for (let i = 0;; i++) {
        const one = await (await req(s, "/v2/pm/app/_svc/pulls/list?tag=v1")).json();
        if (one.entries.length === 1) break;
        if (i > 100) assert.fail("the unmarked pull was never recorded");
        await new Promise((res) => setTimeout(res, 50));
      }
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "image diff: regular_files counts the regular files, files every path shown",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const layer = tarOf([
        { path: "etc", type: "5" },
        { path: "etc/a.conf", data: "a" },
        { path: "etc/link", type: "2", link: "a.conf" },
        { path: "usr/bin/tool", data: "t" },
      ]);
      await pushTarImage(s.url, "rf/app", "v1", [layer]);
      await pushTarImage(s.url, "rf/app", "v2", [layer, tarOf([{ path: "etc/.wh.a.conf" }])]);
      let d;
      for (let i = 0;; i++) {
        const r = await req(s, "/v2/rf/app/_svc/diff?from=v1&to=v2");
        if (r.status === 200) {
          d = await r.json();
          break;
        }
        assert.equal(r.status, 202, await r.clone().text());
        await r.body?.cancel();
        if (i > 300) assert.fail("diff still 202");
        await new Promise((res) => setTimeout(res, 100));
      }
      // v1: etc, etc/a.conf, etc/link, usr/bin/tool (usr and usr/bin have no entry of their own)
      assert.deepEqual([d.from.files, d.from.regular_files], [4, 2]);
      assert.deepEqual([d.to.files, d.to.regular_files], [3, 1]);
    }),
});
