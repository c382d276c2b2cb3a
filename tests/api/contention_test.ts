// Many clients pushing the same content at once (a shared base layer, the same big manifest):
// each push refreshes the digest's blob record, which every other push's final commit is guarded
// by, so they conflict with each other. None of them may fail for it: every push answers 201
// (or, only if a reclamation really raced it, 503 with Retry-After; none runs here) and the
// content reads back intact from every namespace.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha256 } from "../helpers/bytes.ts";
import { OCI_CONFIG, OCI_LAYER, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { withServer } from "../helpers/server.ts";

const CLIENTS = 24;
const ROUNDS = 4;

async function chunked(base: string, ns: string, data: Uint8Array, digest: string) {
  const post = await fetch(`${base}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await post.body?.cancel();
  assert.equal(post.status, 202);
  const half = data.length >> 1;
  let loc = new URL(post.headers.get("location")!, base);
  for (const [from, to] of [[0, half], [half, data.length]]) {
    const r = await fetch(loc, {
      method: "PATCH",
      body: data.subarray(from, to) as BodyInit,
      headers: { "content-range": `${from}-${to - 1}`, "content-type": "application/octet-stream" },
    });
    await r.body?.cancel();
    assert.equal(r.status, 202);
    loc = new URL(r.headers.get("location")!, base);
  }
  loc.searchParams.set("digest", digest);
  return await fetch(loc, { method: "PUT" });
}

function monolithic(base: string, ns: string, data: Uint8Array, digest: string) {
  return fetch(`${base}/v2/${ns}/blobs/uploads/?digest=${digest}`, {
    method: "POST",
    body: data as BodyInit,
    headers: { "content-type": "application/octet-stream" },
  });
}

Deno.test({
  name: "contention: concurrent pushes of one digest all succeed",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      for (let round = 0; round < ROUNDS; round++) {
        const layer = randomBytes(48 * 1024);
        const layerD = await sha256(layer);
        const config = new TextEncoder().encode(JSON.stringify({ os: "linux", round }));
        const configD = await sha256(config);
        // Bigger than the inline limit, so the body goes to the blob store under a reservation.
        const manifest = new TextEncoder().encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: OCI_MANIFEST,
          config: { mediaType: OCI_CONFIG, digest: configD, size: config.length },
          layers: [{ mediaType: OCI_LAYER, digest: layerD, size: layer.length }],
          annotations: { pad: "p".repeat(80_000), round: String(round) },
        }));
        const manifestD = await sha256(manifest);

        await t.step(`round ${round}: ${CLIENTS} clients push the same blobs`, async () => {
          const answers = await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
            const ns = `shared/c${c % 6}`;
            const r = c % 2
              ? await chunked(s.url, ns, layer, layerD)
              : await monolithic(s.url, ns, layer, layerD);
            const cfg = await monolithic(s.url, ns, config, configD);
            await cfg.body?.cancel();
            return [r.status, await r.text(), cfg.status] as const;
          }));
          for (const [status, body, cfgStatus] of answers) {
            assert.equal(status, 201, body);
            assert.equal(cfgStatus, 201);
          }
        });

        await t.step(`round ${round}: ${CLIENTS} clients push the same big manifest`, async () => {
          const answers = await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
            const r = await fetch(`${s.url}/v2/shared/c${c % 6}/manifests/t${c}`, {
              method: "PUT",
              body: manifest as BodyInit,
              headers: { "content-type": OCI_MANIFEST },
            });
            return [r.status, await r.text()] as const;
          }));
          for (const [status, body] of answers) assert.equal(status, 201, body);
        });

        await t.step(`round ${round}: every namespace reads everything back`, async () => {
          for (let n = 0; n < 6; n++) {
            const b = await fetch(`${s.url}/v2/shared/c${n}/blobs/${layerD}`);
            assert.equal(b.status, 200);
            assert.equal(await sha256(new Uint8Array(await b.arrayBuffer())), layerD);
            const m = await fetch(`${s.url}/v2/shared/c${n}/manifests/${manifestD}`);
            assert.equal(m.status, 200);
            assert.equal(await sha256(new Uint8Array(await m.arrayBuffer())), manifestD);
          }
        });
      }
    }),
});
