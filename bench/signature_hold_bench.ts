// Verified before visible (issue 34, Performance): a push into an `enforce` repository with its
// signature, and a pull of a verified image, side by side with a repository whose `[verify]` is
// off, in one server and one run. Each round pushes one image and its cosign signature (blobs,
// then the `.sig` manifest: the image is held, then released) into each repository, the two
// interleaved so drift on a shared machine hits both alike; then 3,000 pulls by tag of the
// verified images of each (8 clients at once, interleaved per request). The client does the
// same work for both repositories: only the server's verification differs.
//
// `--layers=<bytes>,…` gives each image new random layers of those sizes and `--base=<n>` n
// shared base layers, pushed once before the run: each round then pushes as docker does (HEAD
// every layer, POST + PUT the new ones and the config, PUT the manifest), so the fixed cost of
// verification is weighed against a push of real size. Content is made before the clock starts.
// `--skopeo` pushes make-images.sh's v1 image (three real gzip layers from this machine's files)
// with skopeo, as users push, each round with a new config and `--layers` new random layers, then
// its signature over HTTP (Debian's skopeo cannot sign with sigstore keys).
// Run: deno run -A bench/signature_hold_bench.ts [pushes] [pulls] [--layers=…] [--base=n]
//      [--skopeo]
import { parseArgs } from "node:util";
import { startServer } from "../tests/helpers/server.ts";
import { cosignSignature, makeKey, pushSignature, verifyToml } from "../tests/helpers/cosign.ts";
import { distinctManifest, imageManifest, OCI_MANIFEST } from "../tests/helpers/oci_content.ts";
import { randomBytes, sha256 } from "./image_traffic.ts";
import { buildImages, skopeoOk } from "../tests/e2e/_skopeo.ts";
import { join } from "node:path";

const { positionals, values } = parseArgs({
  args: Deno.args,
  allowPositionals: true,
  options: {
    layers: { type: "string", default: "" },
    base: { type: "string", default: "0" },
    skopeo: { type: "boolean", default: false },
  },
});
const PUSHES = Number(positionals[0] ?? 300);
const PULLS = Number(positionals[1] ?? 3000);
const LAYERS = values.layers ? values.layers.split(",").map(Number) : [];
const BASE = Number(values.base);
const SKOPEO = values.skopeo;
const CLIENTS = 8;
const LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip";
const CONFIG_TYPE = "application/vnd.oci.image.config.v1+json";

const key = await makeKey();
const s = await startServer({
  unchecked: true,
  config: verifyToml("enf", "enforce", { ci: key }) + `[repository."off"]\n`,
});

function stats(ms: number[]) {
  const xs = [...ms].sort((a, b) => a - b);
  const q = (p: number) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return { mean, p50: q(0.5), p90: q(0.9), p99: q(0.99) };
}
const fmt = (x: { mean: number; p50: number; p90: number; p99: number }) =>
  `mean ${x.mean.toFixed(2)} ms, p50 ${x.p50.toFixed(2)}, p90 ${x.p90.toFixed(2)}, p99 ${
    x.p99.toFixed(2)
  }`;

interface Blob {
  digest: string;
  bytes: Uint8Array;
}
const blobOf = async (bytes: Uint8Array): Promise<Blob> => ({ digest: await sha256(bytes), bytes });
const descOf = (mediaType: string, b: Blob) => ({
  mediaType,
  digest: b.digest,
  size: b.bytes.byteLength,
});

/** Pushes a blob as docker does: HEAD, and when missing POST + PUT ?digest= with the body. */
async function pushBlob(ns: string, b: Blob): Promise<void> {
  const head = await fetch(`${s.url}/v2/${ns}/blobs/${b.digest}`, { method: "HEAD" });
  await head.body?.cancel();
  if (head.status === 200) return;
  const post = await fetch(`${s.url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await post.body?.cancel();
  if (post.status !== 202) throw new Error(`POST ${ns}: ${post.status}`);
  const loc = new URL(post.headers.get("location")!, s.url);
  loc.searchParams.set("digest", b.digest);
  const put = await fetch(loc, { method: "PUT", body: b.bytes as BodyInit });
  await put.body?.cancel();
  if (put.status !== 201) throw new Error(`PUT ${ns}: ${put.status}`);
}

const base: Blob[] = [];
for (let i = 0; i < BASE; i++) base.push(await blobOf(randomBytes(LAYERS[0] ?? 1 << 20)));

/** An image to push: its blobs (none for a bare manifest) and its manifest. */
async function imageOf(repo: string, i: number) {
  if (LAYERS.length === 0 && BASE === 0) {
    return { blobs: [] as Blob[], ...(await distinctManifest(`bench ${repo} ${i}`)) };
  }
  const config = await blobOf(new TextEncoder().encode(JSON.stringify({
    architecture: "amd64",
    os: "linux",
    rootfs: { type: "layers", diff_ids: [] },
    bench: `${repo} ${i}`,
  })));
  const fresh = await Promise.all(LAYERS.map((n) => blobOf(randomBytes(n))));
  const body = imageManifest(
    descOf(CONFIG_TYPE, config),
    [...base, ...fresh].map((b) => descOf(LAYER_TYPE, b)),
  );
  return { blobs: [...base, ...fresh, config], body, digest: await sha256(body) };
}

const images = SKOPEO ? await buildImages() : null;

/**
 * A layout holding make-images.sh's v1 with a config of its own and `--layers` new layers (the
 * v1 layers hard-linked), for skopeo to push; its manifest digest.
 */
async function layoutOf(repo: string, i: number): Promise<{ dir: string; digest: string }> {
  const src = images!.layout;
  const dir = join(images!.dir, `round-${repo}-${i}`);
  await Deno.mkdir(join(dir, "blobs", "sha256"), { recursive: true });
  await Deno.copyFile(join(src, "oci-layout"), join(dir, "oci-layout"));
  const path = (d: string) => join(dir, "blobs", "sha256", d.slice(7));
  const put = async (bytes: Uint8Array) => {
    const d = await sha256(bytes);
    await Deno.writeFile(path(d), bytes);
    return { digest: d, size: bytes.byteLength };
  };
  const manifest = JSON.parse(
    await Deno.readTextFile(join(src, "blobs", "sha256", images!.v1.digest.slice(7))),
  );
  for (const l of manifest.layers) {
    await Deno.link(join(src, "blobs", "sha256", l.digest.slice(7)), path(l.digest));
  }
  const config = JSON.parse(
    await Deno.readTextFile(join(src, "blobs", "sha256", manifest.config.digest.slice(7))),
  );
  for (const n of LAYERS) {
    // gzip, as the media type says: skopeo would compress a layer that is not, changing digests
    const gz = new Blob([randomBytes(n) as BlobPart]).stream().pipeThrough(
      new CompressionStream("gzip"),
    );
    const l = await put(new Uint8Array(await new Response(gz).arrayBuffer()));
    manifest.layers.push({ mediaType: LAYER_TYPE, ...l });
    config.rootfs.diff_ids.push(l.digest);
  }
  config.config = { ...config.config, Labels: { bench: `${repo} ${i}` } };
  manifest.config = {
    ...manifest.config,
    ...(await put(new TextEncoder().encode(JSON.stringify(config)))),
  };
  const m = await put(new TextEncoder().encode(JSON.stringify(manifest)));
  await Deno.writeTextFile(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{
        mediaType: OCI_MANIFEST,
        ...m,
        annotations: { "org.opencontainers.image.ref.name": "v1" },
      }],
    }),
  );
  return { dir, digest: m.digest };
}

async function pushWithSkopeo(repo: string, i: number): Promise<number> {
  const ns = `${repo}/app`;
  const { dir, digest } = await layoutOf(repo, i);
  const sig = await cosignSignature(key, `bench/${ns}`, digest);
  const t0 = performance.now();
  await skopeoOk([
    "copy",
    "--quiet",
    "--dest-tls-verify=false",
    "--digestfile",
    join(dir, "pushed"),
    `oci:${dir}:v1`,
    `docker://${new URL(s.url).host}/${ns}:t${i}`,
  ]);
  const q = await pushSignature(s, ns, sig);
  await q.body?.cancel();
  if (q.status !== 201) throw new Error(`signature ${repo} ${i}: ${q.status}`);
  const took = performance.now() - t0;
  const pushed = (await Deno.readTextFile(join(dir, "pushed"))).trim();
  if (pushed !== digest) throw new Error(`skopeo pushed ${pushed}, not the layout's ${digest}`);
  await Deno.remove(dir, { recursive: true });
  return took;
}

async function pushOne(repo: string, i: number): Promise<number> {
  if (SKOPEO) return await pushWithSkopeo(repo, i);
  const ns = `${repo}/app`;
  const image = await imageOf(repo, i);
  const sig = await cosignSignature(key, `bench/${ns}`, image.digest);
  const t0 = performance.now();
  for (const b of image.blobs) await pushBlob(ns, b);
  const r = await fetch(`${s.url}/v2/${ns}/manifests/t${i}`, {
    method: "PUT",
    body: image.body as BodyInit,
    headers: { "content-type": OCI_MANIFEST },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`push ${repo} ${i}: ${r.status}`);
  const q = await pushSignature(s, ns, sig);
  await q.body?.cancel();
  if (q.status !== 201) throw new Error(`signature ${repo} ${i}: ${q.status}`);
  return performance.now() - t0;
}

try {
  // warm-up: code paths, KV pages, connections
  for (let i = 0; i < (SKOPEO ? 3 : 20); i++) {
    await pushOne("off", 100_000 + i);
    await pushOne("enf", 100_000 + i);
  }
  const push: Record<string, number[]> = { off: [], enf: [] };
  const t0 = performance.now();
  for (let i = 0; i < PUSHES; i++) {
    const order = i % 2 === 0 ? ["off", "enf"] : ["enf", "off"];
    for (const repo of order) push[repo].push(await pushOne(repo, i));
  }
  const pushWall = performance.now() - t0;
  // every enforce image is visible now (released by its signature)
  const check = await fetch(`${s.url}/v2/enf/app/manifests/t${PUSHES - 1}`);
  await check.body?.cancel();
  if (check.status !== 200) throw new Error(`enforce image not released: ${check.status}`);

  const pull: Record<string, number[]> = { off: [], enf: [] };
  let next = 0;
  const worker = async () => {
    while (next < 2 * PULLS) {
      const n = next++;
      const repo = n % 2 === 0 ? "off" : "enf";
      const tag = `t${(n >> 1) % PUSHES}`;
      const t = performance.now();
      const r = await fetch(`${s.url}/v2/${repo}/app/manifests/${tag}`, {
        headers: { accept: OCI_MANIFEST },
      });
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error(`pull ${repo}:${tag}: ${r.status}`);
      pull[repo].push(performance.now() - t);
    }
  };
  const p0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, worker));
  const pullWall = performance.now() - p0;

  const po = stats(push.off), pe = stats(push.enf);
  const lo = stats(pull.off), le = stats(pull.enf);
  const shape = SKOPEO
    ? `skopeo copy of make-images.sh's v1 + new layers of ${LAYERS.join(", ") || "-"} bytes`
    : LAYERS.length || BASE
    ? `${BASE} shared base layer(s) + new layers of ${LAYERS.join(", ") || "-"} bytes + config`
    : "bare manifests";
  console.log(`signature_hold_bench: ${PUSHES} pushes (image + cosign signature) per repository,`);
  console.log(`  images: ${shape}`);
  console.log(`  ${PULLS} pulls by tag per repository (${CLIENTS} clients, interleaved)`);
  console.log(`push off     : ${fmt(po)}`);
  console.log(`push enforce : ${fmt(pe)}  (held, then released by the signature)`);
  console.log(
    `push enforce / off: mean ${(pe.mean / po.mean).toFixed(3)}, p50 ${
      (pe.p50 / po.p50).toFixed(3)
    }`,
  );
  console.log(`pull off     : ${fmt(lo)}`);
  console.log(`pull enforce : ${fmt(le)}  (verified: the verdict read with the revision)`);
  console.log(
    `pull enforce / off: mean ${(le.mean / lo.mean).toFixed(3)}, p50 ${
      (le.p50 / lo.p50).toFixed(3)
    }`,
  );
  console.log(
    `wall: pushes ${(pushWall / 1000).toFixed(1)} s, pulls ${(pullWall / 1000).toFixed(1)} s (${
      ((2 * PULLS) / (pullWall / 1000)).toFixed(0)
    } pulls/s)`,
  );
} finally {
  images?.cleanup();
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
