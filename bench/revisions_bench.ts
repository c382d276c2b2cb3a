// The manifests list's listing with sizes and platforms (issue 27: shown without a click, fast on
// a namespace of 1,000 manifests): `GET /v2/<ns>/_svc/revisions/list` on 1,000 single-platform
// images, each with its own config blob, cold (every manifest and config read once) and warm
// (the per-digest facts remembered). Run: deno run -A --unstable-kv bench/revisions_bench.ts
import { pushBlob, withServer } from "../tests/helpers/server.ts";
import { jsonBytes, OCI_CONFIG, OCI_MANIFEST } from "../tests/helpers/oci_content.ts";

const N = Number(Deno.args[0] ?? 1000);
const time = async (f: () => Promise<unknown>) => {
  const t = performance.now();
  await f();
  return performance.now() - t;
};

// One process per measurement: the first listing of a fresh server is the cold one.
await withServer({}, async (s) => {
  const layer = await pushBlob(s.url, "big/app", new Uint8Array(1024));
  for (let i = 0; i < N; i += 25) {
    await Promise.all(Array.from({ length: Math.min(25, N - i) }, async (_, k) => {
      const cfg = jsonBytes({ os: "linux", architecture: "amd64", n: i + k });
      const digest = await pushBlob(s.url, "big/app", cfg);
      const r = await fetch(`${s.url}/v2/big/app/manifests/t${i + k}`, {
        method: "PUT",
        headers: { "content-type": OCI_MANIFEST },
        body: jsonBytes({
          schemaVersion: 2,
          mediaType: OCI_MANIFEST,
          config: { mediaType: OCI_CONFIG, digest, size: cfg.length },
          layers: [{
            mediaType: "application/vnd.oci.image.layer.v1.tar",
            digest: layer,
            size: 1024,
          }],
        }) as BodyInit,
      });
      if (r.status !== 201) throw new Error(`push: ${r.status}`);
      await r.body?.cancel();
    }));
  }
  const list = async () => {
    const r = await fetch(`${s.url}/v2/big/app/_svc/revisions/list`);
    const b = await r.json();
    if (b.manifests.length !== N || !b.manifests.every((m: { size?: number }) => m.size)) {
      throw new Error("listing without sizes");
    }
  };
  const cold = await time(list);
  const warm = [];
  for (let i = 0; i < 5; i++) warm.push(await time(list));
  warm.sort((a, b) => a - b);
  console.log(
    `revisions/list of ${N} images with size + platform: cold ${cold.toFixed(0)} ms, warm median ${
      warm[2].toFixed(0)
    } ms`,
  );
});
