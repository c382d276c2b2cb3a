// The compiled binary's way of starting sandbox children, run from source: a server whose
// children are this program on main.ts's __sandbox-child entry (WHARF_SANDBOX_LAUNCH=self, as a
// `deno compile` binary always does) lists a layer and reports an image's packages. `deno compile`
// itself needs a runtime download these machines cannot make (docs/design.md, "As shipped").
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { pushBlob, withServer } from "../helpers/server.ts";
import { OCI_MANIFEST } from "../helpers/oci_content.ts";
import {
  assertDebianListing,
  assertDebianReport,
  writeDebianLayout,
} from "../e2e/_debian_layout.ts";

async function until<T>(what: string, f: () => Promise<T | null>, secs = 90): Promise<T> {
  const end = Date.now() + secs * 1000;
  for (;;) {
    const v = await f();
    if (v !== null) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${secs} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

Deno.test({
  name: "sandbox self-started as a compiled binary would: layer listed, image reported",
  ...serverTestOpts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "wharf-self-" });
    try {
      const layout = await writeDebianLayout(join(dir, "oci"), "1");
      await withServer({ env: { WHARF_SANDBOX_LAUNCH: "self" } }, async (s) => {
        assert.match(s.output(), /sandbox process \(this executable\)/);
        const blob = (d: string) => Deno.readFile(join(layout.dir, "blobs", "sha256", d.slice(7)));
        const manifest = JSON.parse(new TextDecoder().decode(await blob(layout.manifest)));
        await pushBlob(s.url, "demo/app", await blob(manifest.config.digest));
        await pushBlob(s.url, "demo/app", await blob(layout.layer));
        const put = await fetch(`${s.url}/v2/demo/app/manifests/1`, {
          method: "PUT",
          headers: { "content-type": OCI_MANIFEST },
          body: await blob(layout.manifest),
        });
        await put.body?.cancel();
        assert.equal(put.status, 201);
        const listing = await until("the layer's listing", async () => {
          const r = await fetch(`${s.url}/v2/demo/app/_svc/layers/${layout.layer}/entries`);
          if (r.status === 202) return (await r.body?.cancel(), null);
          assert.equal(r.status, 200, await r.clone().text());
          return await r.json();
        });
        assertDebianListing(listing);
        const report = await until("the image's report", async () => {
          const r = await fetch(`${s.url}/v2/demo/app/_svc/vulnerabilities/${layout.manifest}`);
          if (r.status === 202) return (await r.body?.cancel(), null);
          assert.equal(r.status, 200, await r.clone().text());
          return await r.json();
        });
        assertDebianReport(report, layout);
        // Every parse ran in a child: none failed for want of a sandbox.
        assert.doesNotMatch(s.output(), /could not run|no sandbox|sandbox died/);
      });
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
