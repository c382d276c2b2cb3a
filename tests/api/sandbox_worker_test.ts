// `sandbox = "worker"` for both [global.index] and [scan] (the Deno Deploy setting): a pushed
// image is indexed and reported as with child processes, and a hostile layer still ends in a
// named budget without taking the server down. deployConfig chooses "worker" unless the config
// names a sandbox.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { s3Toml, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { FAST_JOBS, pushCase, settle } from "../helpers/hostile.ts";
import { deployConfig } from "../../deploy/deno_deploy.ts";

const CONFIG = `${FAST_JOBS}
[global.index]
sandbox = "worker"
max_wall_secs = 20

[scan]
sandbox = "worker"
`;

const STATUS = `Package: openssl
Status: install ok installed
Architecture: amd64
Version: 3.0.11-1~deb12u1

Package: zlib1g
Status: install ok installed
Architecture: amd64
Source: zlib
Version: 1:1.2.13.dfsg-1
`;

Deno.test({
  ...serverTestOpts,
  name: 'sandbox = "worker": an image is indexed and reported; a hostile layer ends named',
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const img = await pushTarImage(s.url, "wk/app", "v1", [
        tarOf([
          { path: "etc", type: "5" },
          { path: "etc/os-release", data: 'ID=debian\nVERSION_ID="12"\n' },
          { path: "etc/hello.txt", data: "hello from a worker\n" },
          { path: "var/lib/dpkg", type: "5" },
          { path: "var/lib/dpkg/status", data: STATUS },
        ]),
      ]);
      const layer = { ns: "wk/app", layer: img.layers[0] };
      const entries = await settle(s, `/v2/wk/app/_svc/layers/${layer.layer}/entries`);
      const listing = await entries.text();
      assert.equal(entries.status, 200, listing);
      assert.match(listing, /etc\/hello\.txt/);
      const file = await req(
        s,
        `/v2/wk/app/_svc/layers/${layer.layer}/file?path=${encodeURIComponent("etc/hello.txt")}`,
      );
      assert.equal(await file.text(), "hello from a worker\n");

      const report = await settle(s, `/v2/wk/app/_svc/vulnerabilities/${img.digest}`);
      const body = await report.json();
      assert.equal(report.status, 200, JSON.stringify(body));
      assert.equal(body.os.id, "debian");
      assert.deepEqual(
        body.packages.map((p: { name: string; version: string }) => `${p.name}=${p.version}`)
          .sort(),
        ["openssl=3.0.11-1~deb12u1", "zlib1g=1:1.2.13.dfsg-1"],
      );

      // A 1,000:1 bomb stops on its ratio budget inside the worker; the server answers on.
      const bomb = await pushCase(s, "bomb");
      const r = await settle(s, `/v2/${bomb.ns}/_svc/layers/${bomb.layer}/entries`);
      const err = await r.json();
      assert.equal(r.status, 404, JSON.stringify(err));
      assert.equal(err.errors[0].code, "UNSUPPORTED");
      assert.match(JSON.stringify(err), /max_uncompressed_ratio|max_uncompressed_size/);
      const health = await req(s, "/healthz");
      assert.equal(health.status, 200);
      await health.body?.cancel();
    }),
});

Deno.test("deployConfig: workers unless the config names a sandbox", async () => {
  const old = Deno.env.get("WHARF_CONFIG");
  try {
    const s3 = s3Toml("http://127.0.0.1:1", "deploy");
    Deno.env.set("WHARF_CONFIG", s3);
    let cfg = await deployConfig();
    assert.equal(cfg.global.index.sandbox, "worker");
    assert.equal(cfg.scan.sandbox, "worker");
    Deno.env.set(
      "WHARF_CONFIG",
      `${s3}\n[global.index]\nsandbox = "off"\n[scan]\nsandbox = "process"\n`,
    );
    cfg = await deployConfig();
    assert.equal(cfg.global.index.sandbox, "off");
    assert.equal(cfg.scan.sandbox, "process");
  } finally {
    if (old === undefined) Deno.env.delete("WHARF_CONFIG");
    else Deno.env.set("WHARF_CONFIG", old);
  }
});
