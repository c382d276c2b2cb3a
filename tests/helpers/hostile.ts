// Pushing the hostile layers of tests/fixtures/hostile_layers.py as ordinary images, and the
// paths that read them back: shared by tests/api/hostile_test.ts and bench/hostile_bench.ts.
import assert from "node:assert/strict";
import { req } from "./api.ts";
import { pushBlob, type TestServer } from "./server.ts";
import { jsonBytes, OCI_CONFIG } from "./oci_content.ts";
import { processUsage } from "../../lib/sandbox/mod.ts";

const GEN = new URL("../fixtures/hostile_layers.py", import.meta.url).pathname;
const GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";

/** Jobs polled often and retried quickly, so a case's final answer comes in seconds. */
export const FAST_JOBS = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
max_attempts = 2
lease_secs = 5
`;

/** Every case of hostile_layers.py but `names` (pushed first, as the image that must stay
 * pullable) and `million_files` (the bench's). */
export const HOSTILE_CASES = [
  "pax_long_path",
  "nested_dirs",
  "symlink_chain",
  "link_loop",
  "dpkg_newlines",
  "dpkg_many",
  "os_release_huge",
  "secrets_flood",
  "rpm_view",
  "garbage_dbs",
  "many_files",
  "many_files_dpkg",
  "bomb",
  "nul_path",
  "cert_bundle",
  "costly_elf",
  "long_block",
  "bad_checksum",
  "plain-as-gzip",
  "random",
  "empty",
  "truncated-many_files",
];

export interface PushedCase {
  ns: string;
  layer: string;
  manifest: string;
  /** bytes pushed */
  size: number;
}

export async function hostileLayer(kase: string): Promise<Uint8Array> {
  const out = await Deno.makeTempFile({ prefix: `hostile-${kase}-` });
  try {
    const r = await new Deno.Command("python3", { args: [GEN, kase, out] }).output();
    assert.ok(r.success, new TextDecoder().decode(r.stderr));
    return await Deno.readFile(out);
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

/** Pushes the case as `h/<case>:v1`, one layer and a plain config. */
export async function pushCase(
  s: TestServer,
  kase: string,
  ns = `h/${kase.replaceAll("_", "-")}`,
  tag = "v1",
): Promise<PushedCase> {
  const bytes = await hostileLayer(kase);
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", config: { Env: ["PATH=/bin"] } });
  const config = await pushBlob(s.url, ns, cfg);
  const layer = await pushBlob(s.url, ns, bytes);
  const body = JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
    layers: [{ mediaType: GZIP, digest: layer, size: bytes.length }],
  });
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
    body,
  });
  assert.equal(r.status, 201, await r.text());
  return { ns, layer, manifest: r.headers.get("docker-content-digest")!, size: bytes.length };
}

export const entriesPath = (c: { ns: string; layer: string }) =>
  `/v2/${c.ns}/_svc/layers/${c.layer}/entries`;
export const filePath = (c: { ns: string; layer: string }, path: string, extra = "") =>
  `/v2/${c.ns}/_svc/layers/${c.layer}/file?path=${encodeURIComponent(path)}${extra}`;
export const reportPath = (c: { ns: string; manifest: string }) =>
  `/v2/${c.ns}/_svc/vulnerabilities/${c.manifest}`;

/** GETs `path` until it is not 202; fails on a 5xx. */
export async function settle(s: TestServer, path: string, ms = 180_000): Promise<Response> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await req(s, path);
    // Only a failure's body is read: reading a 200 listing of a million entries here stalled
    // this process, and with it the watcher's timing of the server (12 s "answers").
    if (r.status >= 500) assert.fail(`${path}: ${r.status} ${await r.text()}`);
    if (r.status !== 202) return r;
    await r.body?.cancel();
    if (Date.now() > deadline) assert.fail(`${path} still 202 after ${ms} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Resident bytes of `pid` (0 once it is gone). */
export async function rssOf(pid: number): Promise<number> {
  return (await processUsage(pid))?.rssBytes ?? 0;
}

/** Polls /healthz and tags/list of `ns` every 100 ms; keeps the slowest answer, any non-200 and
 * the serving process's peak RSS. */
export function watchServer(s: TestServer, ns: string, trace = false) {
  let stop = false;
  let slowest = 0;
  const bad: string[] = [];
  let peakRss = 0;
  const done = (async () => {
    while (!stop) {
      for (const path of ["/healthz", `/v2/${ns}/tags/list`]) {
        const t = performance.now();
        const r = await req(s, path, { signal: AbortSignal.timeout(10_000) }).catch((e) => {
          bad.push(`${path}: ${e}`);
          return null;
        });
        await r?.body?.cancel();
        const ms = performance.now() - t;
        slowest = Math.max(slowest, ms);
        if (ms > 300 && trace) {
          console.log(`slow ${path}: ${Math.round(ms)} ms at ${new Date().toISOString()}`);
        }
        if (r && r.status !== 200) bad.push(`${path}: ${r.status}`);
      }
      peakRss = Math.max(peakRss, await rssOf(s.pid));
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  return {
    /** the figures so far, and a fresh start for the next stretch */
    take() {
      const r = { slowest, peakRss };
      slowest = 0;
      peakRss = 0;
      return r;
    },
    async end() {
      stop = true;
      await done;
      return { slowest, bad, peakRss };
    },
  };
}
