// A pull-through cache never serves rot, it refetches: a cached manifest whose stored body is gone
// from the blob store (quarantined, lost) or no longer hashes to its digest is fetched again from
// the upstream by its next GET and served whole. Which of the registry's errors means "the body is
// unavailable" is handed to the cache (lib/pull_through/ports.ts), so this pins that wiring too.
// The files are the fs store's, so this suite is not among those run again on S3.
import assert from "node:assert/strict";
import { join } from "node:path";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { descOf, imageManifest, jsonBytes, OCI_CONFIG } from "../helpers/oci_content.ts";

/** The file of `digest` under a test server's fs blob store. */
function blobFile(s: TestServer, digest: string): string {
  const [alg, hex] = digest.split(":");
  return join(s.dataDir, "blobs", "blobs", alg, hex.slice(0, 2), hex);
}

const exists = (path: string) => Deno.stat(path).then(() => true, () => false);

Deno.test(
  "pull-through: a cached manifest whose stored body is missing or rotten is fetched again from the upstream",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const config = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
      up.addBlob("library/big", config);
      // Past the 48 KiB kept inline in its revision record: the body lives in the blob store.
      const manifest = imageManifest(await descOf(OCI_CONFIG, config), [], {
        annotations: { "org.example.pad": "p".repeat(64 * 1024) },
      });
      const digest = up.addManifest("library/big", manifest, { tags: ["1.0"] });
      const fetches = () => up.count("GET", new RegExp(`/manifests/${digest}$`));
      const get = async (s: TestServer) => {
        const r = await req(s, `/v2/hub/library/big/manifests/${digest}`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("docker-content-digest"), digest);
        assert.deepEqual(await bytesOf(r), manifest);
      };
      const config_ = `
[repository."hub"]
namespace = "docker.io"

[[repository."hub".upstream]]
url = "${up.url}"
`;
      await withServer({ config: config_ }, async (s) => {
        await get(s);
        assert.equal(fetches(), 1);
        const file = blobFile(s, digest);
        assert.ok(await exists(file), "the body is in the blob store, not inline");
        await get(s);
        assert.equal(fetches(), 1, "a cached digest is served locally");

        // Gone from the store: fetched again, stored again.
        await Deno.remove(file);
        await get(s);
        assert.equal(fetches(), 2, "fetched again when the stored body is missing");
        assert.ok(await exists(file), "stored again");
        await get(s);
        assert.equal(fetches(), 2);

        // Rotten on disk: quarantined by the read, fetched again.
        const bytes = await Deno.readFile(file);
        bytes[bytes.length >> 1] ^= 0xff;
        await Deno.writeFile(file, bytes);
        await get(s);
        assert.equal(fetches(), 3, "fetched again when the stored body fails its digest");
        await get(s);
        assert.equal(fetches(), 3);
      });
    } finally {
      await up.close();
    }
  },
);
