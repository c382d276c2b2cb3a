// Issue 22 §4 through a running server: a pull-through upstream that redirects to a metadata
// address is an unreachable upstream (cached copies are served stale, uncached ones fail with
// 503), a descriptor's `urls` (foreign layers) is never fetched, and `[global] outbound_allow`
// is validated at startup.
import assert from "node:assert/strict";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { assertErrorCode, bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { startServer, withServer } from "../helpers/server.ts";
import { startSink } from "../helpers/outbound.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  unique,
} from "../helpers/oci_content.ts";

const FOREIGN_LAYER = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

function hubConfig(up: FakeRegistry, extra = ""): string {
  return `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 400
max_attempts = 2
${extra}
[repository."hub"]
[[repository."hub".upstream]]
url = "${up.url}"
connect_timeout_secs = 2
read_timeout_secs = 5
`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test(
  "pull-through: a redirect to a metadata address is an unreachable upstream",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const cfgBytes = jsonBytes({ architecture: "amd64", os: "linux" });
      up.addBlob("library/app", cfgBytes);
      const layer = unique("layer");
      const missing = unique("never cached");
      up.addBlob("library/app", layer);
      up.addBlob("library/app", missing);
      const ld = await descOf(OCI_LAYER, layer);
      const manifest = imageManifest(await descOf(OCI_CONFIG, cfgBytes), [ld]);
      up.addManifest("library/app", manifest, { tags: ["latest"] });
      const md = await descOf(OCI_LAYER, missing);
      await withServer({ config: hubConfig(up) }, async (s) => {
        const first = await req(s, "/v2/hub/library/app/manifests/latest");
        assert.equal(first.status, 200);
        await first.body?.cancel();
        const b = await req(s, `/v2/hub/library/app/blobs/${ld.digest}`);
        assert.deepEqual(await bytesOf(b), layer);

        up.fault({ path: /./ }, {
          status: 307,
          headers: { location: "http://169.254.169.254/latest/meta-data/" },
        });
        const stale = await req(s, "/v2/hub/library/app/manifests/latest");
        assert.equal(stale.status, 200, "the cached copy is served, as for any outage");
        assert.match(stale.headers.get("warning") ?? "", /^110 /);
        assert.deepEqual(await bytesOf(stale), manifest);
        const err = await assertErrorCode(
          await req(s, `/v2/hub/library/app/blobs/${md.digest}`),
          503,
          "PROVIDER_UNAVAILABLE",
        );
        assert.match(String(err.detail ?? err.message), /refused/);
        assert.match(s.output(), /169\.254\.169\.254 is a cloud metadata address/);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "pull-through: a descriptor's urls (a foreign layer) is never fetched",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    await using sink = startSink();
    try {
      const cfgBytes = jsonBytes({ architecture: "amd64", os: "windows" });
      up.addBlob("library/win", cfgBytes);
      const hosted = unique("layer the upstream has");
      up.addBlob("library/win", hosted);
      const foreign = unique("layer only at its urls");
      const hd = {
        ...(await descOf(FOREIGN_LAYER, hosted)),
        urls: [`${sink.url}/hosted.tar.gz`, `http://127.0.0.1:${sink.port}/h`],
      };
      const fd = { ...(await descOf(FOREIGN_LAYER, foreign)), urls: [`${sink.url}/foreign`] };
      up.addManifest("library/win", imageManifest(await descOf(OCI_CONFIG, cfgBytes), [hd, fd]), {
        tags: ["ltsc"],
      });
      await withServer({ config: hubConfig(up) }, async (s) => {
        const m = await req(s, "/v2/hub/library/win/manifests/ltsc");
        assert.equal(m.status, 200);
        await m.body?.cancel();
        const h = await req(s, `/v2/hub/library/win/blobs/${hd.digest}`);
        assert.equal(h.status, 200);
        assert.deepEqual(await bytesOf(h), hosted, "from the upstream's /v2 blob URL");
        const f = await req(s, `/v2/hub/library/win/blobs/${fd.digest}`);
        await assertErrorCode(f, 404, "BLOB_UNKNOWN");
        const head = await req(s, `/v2/hub/library/win/blobs/${fd.digest}`, { method: "HEAD" });
        assert.equal(head.status, 404);
        // give background cache jobs their chance to misbehave
        await sleep(1500);
      });
      assert.deepEqual(sink.seen, [], "nothing was asked of the urls' server");
      assert.ok(up.count("GET", `/blobs/${fd.digest}`) >= 1, "the upstream was asked instead");
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "[global] outbound_allow: IPs and CIDRs only, named in the error",
  serverTestOpts,
  async () => {
    const bad = `[global]\noutbound_allow = ["169.254.10.0/24", "metadata.internal"]\n`;
    await assert.rejects(startServer({ config: bad }), /global\.outbound_allow\[1\]/);
    const ok = `[global]\noutbound_allow = ["169.254.10.0/24", "127.0.0.1", "fd00:ec2::254"]\n`;
    await withServer({ config: ok }, async (s) => {
      assert.equal((await req(s, "/v2/")).status, 200);
    });
  },
);
