// Shared plumbing for the skopeo e2e tests: tool detection (skip vs. fail under
// WHARF_REQUIRE_TOOLS=1), running skopeo with a hard timeout, building the OCI test layout with
// ../shared/tools/make-images.sh, and byte-level comparisons against a registry or a layout.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { req } from "../helpers/api.ts";
import { sha256Hex, type TestServer } from "../helpers/server.ts";
import { isFile, missingReason, runs } from "./_tools.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The image builder lives beside the project checkout; WHARF_MAKE_IMAGES overrides it. */
// The team's shared image builder when checked out beside the project, else the copy vendored
// in tests/fixtures (a clean CI clone has no ../shared).
const SHARED_MAKE_IMAGES = join(ROOT, "..", "shared", "tools", "make-images.sh");
export const MAKE_IMAGES = Deno.env.get("WHARF_MAKE_IMAGES") ??
  (isFile(SHARED_MAKE_IMAGES)
    ? SHARED_MAKE_IMAGES
    : join(ROOT, "tests", "fixtures", "make-images.sh"));

/**
 * Why the skopeo tests cannot run here, or null when they can. Under WHARF_REQUIRE_TOOLS=1 a
 * missing tool throws at module load so CI fails instead of reporting a green, empty run.
 */
export function missingTools(): string | null {
  const missing: string[] = [];
  if (!runs("skopeo", ["--version"])) missing.push("skopeo");
  // make-images.sh needs jq, GNU tar and gzip.
  if (!runs("jq", ["--version"])) missing.push("jq");
  if (!runs("tar", ["--version"])) missing.push("tar");
  if (!runs("gzip", ["--version"])) missing.push("gzip");
  if (!isFile(MAKE_IMAGES)) missing.push(MAKE_IMAGES);
  return missingReason("skopeo", missing, "apt-get install skopeo jq libcap2-bin");
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs skopeo with a private auth file (no stray host credentials) and an accept-anything
 * policy (a fresh machine's /etc/containers/policy.json is not ours to rely on).
 */
export async function skopeo(args: string[], timeoutMs = 60_000): Promise<Run> {
  const authDir = await Deno.makeTempDir({ prefix: "wharf-skopeo-auth-" });
  try {
    const authfile = join(authDir, "auth.json");
    await Deno.writeTextFile(authfile, `{"auths":{}}`);
    const out = await new Deno.Command("skopeo", {
      args: ["--insecure-policy", ...args],
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
      env: { REGISTRY_AUTH_FILE: authfile },
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } finally {
    await Deno.remove(authDir, { recursive: true }).catch(() => {});
  }
}

/** skopeo that must succeed; the failure message carries its stderr and the server's log. */
export async function skopeoOk(args: string[], s?: TestServer): Promise<Run> {
  const r = await skopeo(args);
  if (r.code !== 0) {
    const log = s ? `\n--- server output (tail) ---\n${s.output().slice(-3000)}` : "";
    assert.fail(`skopeo ${args.join(" ")} exited ${r.code}:\n${r.stderr.slice(-3000)}${log}`);
  }
  return r;
}

export interface Images {
  /** temp dir holding everything; removed by cleanup() */
  dir: string;
  /** OCI layout with refs v1, multi, sbom */
  layout: string;
  refs: Record<string, string>;
  v1: { digest: string; size: number; config: string; layers: string[] };
  multi: { digest: string; amd64: string; arm64: string };
  sbom: { digest: string; size: number; artifactType: string };
  cleanup(): void;
}

function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2].replace(/^"(.*)"$/, "$1");
  }
  return out;
}

export async function buildImages(): Promise<Images> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-e2e-images-" });
  const out = await new Deno.Command("bash", {
    args: [MAKE_IMAGES, dir],
    stdout: "piped",
    stderr: "piped",
    env: { BIG_MB: "0" },
    signal: AbortSignal.timeout(60_000),
  }).output();
  if (!out.success) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw new Error(`make-images.sh failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
  const refs = parseEnv(await Deno.readTextFile(join(dir, "refs.env")));
  for (const k of ["V1_DIGEST", "V1_CONFIG", "V1_LAYERS", "MULTI_DIGEST", "SBOM_DIGEST"]) {
    assert.ok(refs[k], `refs.env lacks ${k}`);
  }
  return {
    dir,
    layout: join(dir, "oci"),
    refs,
    v1: {
      digest: refs.V1_DIGEST,
      size: Number(refs.V1_SIZE),
      config: refs.V1_CONFIG,
      layers: refs.V1_LAYERS.split(/\s+/).filter(Boolean),
    },
    multi: { digest: refs.MULTI_DIGEST, amd64: refs.MULTI_AMD64, arm64: refs.MULTI_ARM64 },
    sbom: {
      digest: refs.SBOM_DIGEST,
      size: Number(refs.SBOM_SIZE),
      artifactType: refs.SBOM_ARTIFACT_TYPE,
    },
    cleanup: () => {
      try {
        Deno.removeSync(dir, { recursive: true });
      } catch { /* already gone */ }
    },
  };
}

export function blobPath(layout: string, digest: string): string {
  const [alg, hex] = digest.split(":");
  return join(layout, "blobs", alg, hex);
}

export function readBlob(layout: string, digest: string): Promise<Uint8Array> {
  return Deno.readFile(blobPath(layout, digest));
}

/** Every blob file of a layout, as sorted `alg:hex` digests. */
export async function layoutDigests(layout: string): Promise<string[]> {
  const out: string[] = [];
  for await (const alg of Deno.readDir(join(layout, "blobs"))) {
    if (!alg.isDirectory) continue;
    for await (const f of Deno.readDir(join(layout, "blobs", alg.name))) {
      if (f.isFile) out.push(`${alg.name}:${f.name}`);
    }
  }
  return out.sort();
}

/** The digest each `org.opencontainers.image.ref.name` of a layout's index.json points at. */
export async function layoutRefs(layout: string): Promise<Record<string, string>> {
  const index = JSON.parse(await Deno.readTextFile(join(layout, "index.json")));
  const out: Record<string, string> = {};
  for (const d of index.manifests ?? []) {
    const name = d.annotations?.["org.opencontainers.image.ref.name"];
    if (name) out[name] = d.digest;
  }
  return out;
}

/** Same blob set, and every blob byte-identical and hashing to its own name. */
export async function assertSameLayoutBlobs(src: string, dst: string): Promise<void> {
  const want = await layoutDigests(src);
  assert.deepEqual(await layoutDigests(dst), want, "blob sets of the two layouts differ");
  for (const d of want) {
    const a = await readBlob(src, d);
    const b = await readBlob(dst, d);
    assert.equal(`sha256:${await sha256Hex(b)}`, d, `copied blob ${d} does not hash to its name`);
    assert.ok(a.length === b.length && a.every((x, i) => x === b[i]), `blob ${d} bytes differ`);
  }
}

const MANIFEST_ACCEPT = [
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
].join(", ");

/**
 * Pulls `ref` from the registry by plain HTTP and checks it against the layout byte for byte:
 * the manifest, then (recursively for an index) every config, layer and child manifest.
 * Returns the manifest digest the registry reported.
 */
export async function assertPullMatchesLayout(
  s: TestServer,
  ns: string,
  ref: string,
  layout: string,
  wantDigest: string,
): Promise<void> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, { headers: { accept: MANIFEST_ACCEPT } });
  const body = new Uint8Array(await r.arrayBuffer());
  assert.equal(r.status, 200, `GET manifest ${ns}:${ref}: ${r.status}`);
  assert.equal(r.headers.get("docker-content-digest"), wantDigest, `digest of ${ns}:${ref}`);
  const want = await readBlob(layout, wantDigest);
  assert.deepEqual(body, want, `manifest ${ns}:${ref} bytes differ from the layout`);
  const m = JSON.parse(new TextDecoder().decode(body));
  assert.equal(r.headers.get("content-type"), m.mediaType, `content type of ${ns}:${ref}`);
  if (Array.isArray(m.manifests)) {
    for (const child of m.manifests) {
      await assertPullMatchesLayout(s, ns, child.digest, layout, child.digest);
    }
    return;
  }
  for (const d of [m.config, ...(m.layers ?? [])]) {
    if (!d) continue;
    const b = await req(s, `/v2/${ns}/blobs/${d.digest}`);
    const bytes = new Uint8Array(await b.arrayBuffer());
    assert.equal(b.status, 200, `GET blob ${ns} ${d.digest}: ${b.status}`);
    assert.equal(bytes.length, d.size, `size of blob ${d.digest}`);
    assert.deepEqual(bytes, await readBlob(layout, d.digest), `blob ${d.digest} bytes differ`);
  }
}
