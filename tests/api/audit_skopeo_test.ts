// The audit trail seen from a real client: skopeo pushes as alice (blob, manifest and tag
// records naming her), is refused as bob (a denial record), and deletes the image (a
// manifest.delete record); every record carries the client's address and a request id.
import assert from "node:assert/strict";
import { withServer } from "../helpers/server.ts";
import { buildImages, type Images, missingTools, skopeo, skopeoOk } from "../e2e/_skopeo.ts";
import { auditAll, identities, POLICY } from "./audit_helpers.ts";

const skipReason = missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());

Deno.test({
  name: "audit: skopeo push, refused push and delete are recorded with who did them",
  ignore: skipReason !== null,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const img = images!;
    const config = (await identities()) + POLICY + `\n[global.audit]\nenabled = true\n`;
    await withServer({ config }, async (s) => {
      const dest = `docker://127.0.0.1:${s.port}/team/sk:v1`;
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        "--dest-creds",
        "alice:alice-audit-pw-2",
        `oci:${img.layout}:v1`,
        dest,
      ], s);
      const pushed = await auditAll(s, "?namespace=team/sk");
      const push = pushed.filter((r) => r.action === "manifest.push");
      assert.equal(push.length, 1, JSON.stringify(pushed));
      assert.equal(push[0].digest, img.v1.digest);
      assert.equal(push[0].identity, "alice");
      assert.equal(push[0].client_ip, "127.0.0.1");
      assert.deepEqual(
        pushed.filter((r) => r.action === "blob.push").map((r) => r.digest).sort(),
        [img.v1.config, ...img.v1.layers].sort(),
      );
      assert.equal(pushed.filter((r) => r.action === "tag.create").length, 1);

      const refused = await skopeo([
        "copy",
        "--dest-tls-verify=false",
        "--dest-creds",
        "bob:bob-audit-pw-3",
        `oci:${img.layout}:v1`,
        `docker://127.0.0.1:${s.port}/team/sk:v2`,
      ]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /denied/i);
      const denied = await auditAll(s, "?identity=bob");
      assert.ok(denied.length >= 1);
      assert.ok(denied.every((r) => r.outcome === "denied" && r.namespace === "team/sk"));

      const del = await skopeo([
        "delete",
        "--tls-verify=false",
        "--creds",
        "alice:alice-audit-pw-2",
        dest,
      ]);
      assert.equal(del.code, 0, del.stderr);
      const deleted = await auditAll(s, "?action=manifest.delete");
      assert.equal(deleted.length, 1);
      assert.equal(deleted[0].digest, img.v1.digest);
      assert.equal(deleted[0].identity, "alice");
      for (const r of [...pushed, ...deleted]) assert.ok(r.request_id, JSON.stringify(r));
    });
  },
});
