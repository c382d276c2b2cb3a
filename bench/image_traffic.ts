// The image traffic the benches send: blobs and small OCI images pushed the way docker
// pushes them (POST + PUT per blob, then the manifest) and pulled back (manifest, then each blob).
// Every status is checked: a bench that measured refusals would measure nothing.

export const MANIFEST = "application/vnd.oci.image.manifest.v1+json";
/** each pushed image's layer: 64 KiB random, the rest zeros, distinct by a serial number */
export const LAYER_BYTES = 256 * 1024;

export async function sha256(b: Uint8Array): Promise<string> {
  const h = await crypto.subtle.digest("SHA-256", b as BufferSource);
  return "sha256:" + Array.from(new Uint8Array(h), (x) => x.toString(16).padStart(2, "0")).join("");
}

/** `n` random bytes (getRandomValues fills at most 64 KiB per call). */
export function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let o = 0; o < n; o += 65536) crypto.getRandomValues(b.subarray(o, Math.min(n, o + 65536)));
  return b;
}

/** Pushes one blob as docker does (POST, then PUT ?digest= with the body); its digest. */
export async function upload(url: string, ns: string, data: Uint8Array): Promise<string> {
  const digest = await sha256(data);
  const post = await fetch(`${url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await post.body?.cancel();
  if (post.status !== 202) throw new Error(`POST upload ${url}: ${post.status}`);
  const loc = new URL(post.headers.get("location")!, url);
  loc.searchParams.set("digest", digest);
  const put = await fetch(loc, {
    method: "PUT",
    body: data as BodyInit,
    headers: { "content-type": "application/octet-stream" },
  });
  const text = await put.text();
  if (put.status !== 201) throw new Error(`PUT upload ${url}: ${put.status} ${text}`);
  return digest;
}

/**
 * Pushes an image of random layers of `layerBytes` each (and a unique config) as `repo:v1`;
 * the layers' digests.
 */
export async function pushImage(
  url: string,
  repo: string,
  layerBytes: number[],
): Promise<string[]> {
  const cfg = new TextEncoder().encode(
    JSON.stringify({ architecture: "amd64", os: "linux", n: crypto.randomUUID() }),
  );
  const config = await upload(url, repo, cfg);
  const layers = [];
  for (const size of layerBytes) {
    layers.push({
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: await upload(url, repo, randomBytes(size)),
      size,
    });
  }
  const r = await fetch(`${url}/v2/${repo}/manifests/v1`, {
    method: "PUT",
    headers: { "content-type": MANIFEST },
    body: JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: config,
        size: cfg.length,
      },
      layers,
    }),
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`push manifest ${r.status}`);
  return layers.map((l) => l.digest);
}

/**
 * Pulls `repo:v1` as a client does: the manifest, then config and layers 3 at a time, every
 * body read to the end and its length checked against Content-Length. Seconds and bytes.
 */
export async function pullImage(base: string, repo: string): Promise<{ s: number; bytes: number }> {
  const t0 = performance.now();
  const m = await fetch(`${base}/v2/${repo}/manifests/v1`, { headers: { accept: MANIFEST } });
  if (m.status !== 200) throw new Error(`manifest ${m.status} ${await m.text()}`);
  const man = await m.json();
  const blobs: string[] = [
    man.config.digest,
    ...man.layers.map((l: { digest: string }) => l.digest),
  ];
  let bytes = 0;
  let next = 0;
  await Promise.all(Array.from({ length: 3 }, async () => {
    for (let i = next++; i < blobs.length; i = next++) {
      const r = await fetch(`${base}/v2/${repo}/blobs/${blobs[i]}`);
      if (r.status !== 200) throw new Error(`${base} ${blobs[i]}: ${r.status} ${await r.text()}`);
      const cl = r.headers.get("content-length");
      let n = 0;
      for await (const c of r.body!) n += c.length;
      if (cl !== null && Number(cl) !== n) {
        throw new Error(`${base} ${blobs[i]}: Content-Length ${cl}, got ${n} bytes`);
      }
      bytes += n;
    }
  }));
  return { s: (performance.now() - t0) / 1000, bytes };
}

let serial = 0;
/** Pushes one distinct image to `bench/app:tag`. */
export async function pushOnce(
  url: string,
  tag: string,
): Promise<{ digest: string; blobs: string[] }> {
  const n = serial++;
  const layer = new Uint8Array(LAYER_BYTES);
  crypto.getRandomValues(layer.subarray(0, 65536));
  new DataView(layer.buffer).setUint32(65536, n);
  const cfg = new TextEncoder().encode(JSON.stringify({ architecture: "amd64", os: "linux", n }));
  const [c, l] = [await upload(url, "bench/app", cfg), await upload(url, "bench/app", layer)];
  const body = new TextEncoder().encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: c, size: cfg.length },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar",
      digest: l,
      size: layer.length,
    }],
  }));
  const r = await fetch(`${url}/v2/bench/app/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": MANIFEST },
  });
  const text = await r.text();
  if (r.status !== 201) throw new Error(`manifest PUT ${url}: ${r.status} ${text}`);
  return { digest: await sha256(body), blobs: [c, l] };
}

/** Pulls an image pushed by pushOnce: its manifest by digest, then its blobs. */
export async function pullOnce(
  url: string,
  img: { digest: string; blobs: string[] },
): Promise<void> {
  const m = await fetch(`${url}/v2/bench/app/manifests/${img.digest}`, {
    headers: { accept: MANIFEST },
  });
  await m.arrayBuffer();
  if (m.status !== 200) throw new Error(`manifest GET ${url}: ${m.status}`);
  for (const d of img.blobs) {
    const r = await fetch(`${url}/v2/bench/app/blobs/${d}`);
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`blob GET ${url}: ${r.status}`);
  }
}
