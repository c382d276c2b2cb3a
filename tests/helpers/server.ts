// Starts a real Wharf process (main.ts serve) on 127.0.0.1 with a temp KV file and blob dir,
// and reads the bound port from its startup line. Used by every API and e2e test. The process is
// started as `deno task start` starts it (tests/helpers/launch.ts): the permission set and the
// V8 flags of a user's server, never more.
import { basename, join } from "node:path";
import { KV_LIMIT_MARKER } from "../../lib/kv/mod.ts";
import { JOB_QUEUES } from "../../lib/config/mod.ts";
import { wharfCommand } from "./launch.ts";

export interface ServerOptions {
  /** extra TOML appended after the generated [server]/[blob_store]/[metadata_store] sections */
  config?: string;
  /** extra keys for the generated [server] table (e.g. `trusted_proxies = [...]`; [server.tls] can go in `config`) */
  server?: string;
  /** listen on this port instead of an ephemeral one (e.g. when the config names its own URL) */
  port?: number;
  /** reuse an existing data directory (for restart tests) */
  dataDir?: string;
  /** TOML replacing the generated `[blob_store.fs]` table (e.g. an `[blob_store.s3]` one) */
  blobStore?: string;
  /** a KV file shared with other servers (scale-out tests) instead of one in the data dir */
  metadataPath?: string;
  /** run without the test-only KV limit wrapper (benches: it serializes every value to size it,
   * which costs time and, under load, hundreds of MiB) */
  unchecked?: boolean;
  /** extra environment for the server process (never flags: it runs its task as it ships) */
  env?: Record<string, string>;
  /** more arguments to `serve` after its config file, e.g. `--port N` (Wharf's, never Deno's) */
  args?: string[];
}

export interface TestServer {
  url: string; // http://127.0.0.1:PORT, or https:// when [server.tls] is configured
  port: number;
  dataDir: string;
  configPath: string;
  /** the server process (benches read its RSS from /proc) */
  pid: number;
  /** graceful stop (SIGTERM) */
  stop(): Promise<void>;
  /** SIGKILL, no cleanup */
  kill(): Promise<void>;
  /** output captured so far (stdout+stderr) */
  output(): string;
}

/** Server output a test keeps (characters): enough for any failure message. */
const OUTPUT_KEPT = 8 << 20;

/**
 * With WHARF_TEST_S3=<endpoint of an s3rver> (tests/s3/suites_on_s3_test.ts sets it), every
 * server the suites start keeps its bytes in that S3 server, under a key prefix of its own
 * named after its data dir (so a restart on the same data dir finds its blobs again).
 */
function defaultBlobStore(dataDir: string): string {
  const s3 = Deno.env.get("WHARF_TEST_S3");
  if (!s3) return `[blob_store.fs]\nroot_dir = ${JSON.stringify(join(dataDir, "blobs"))}`;
  return s3Toml(s3, `t/${basename(dataDir)}`);
}

/** The `[blob_store.s3]` table for the test S3 server (tests/helpers/s3_server.ts). */
export function s3Toml(endpoint: string, keyPrefix: string, extra = ""): string {
  return `[blob_store.s3]
endpoint = ${JSON.stringify(endpoint)}
bucket = "wharf"
region = "us-east-1"
access_key_id = "S3RVER"
secret_key = "S3RVER"
path_style = true
key_prefix = ${JSON.stringify(keyPrefix)}
multipart_part_size = ${5 << 20}
${extra}`;
}

/**
 * With WHARF_TEST_REPLICAS=N (and WHARF_TEST_S3), a server is N `serve` processes on one KV file
 * and one S3 prefix behind a round-robin HTTP proxy in the test process, so every request of a
 * suite may land on another process (tests/s3/suites_on_s3_test.ts runs the core that way).
 */
export async function startServer(opts: ServerOptions = {}): Promise<TestServer> {
  const n = Number(Deno.env.get("WHARF_TEST_REPLICAS") ?? "1");
  if (n <= 1 || !Deno.env.get("WHARF_TEST_S3") || opts.blobStore || opts.port) {
    return await startServerProcess(opts);
  }
  const first = await startServerProcess(opts);
  const all = [first];
  try {
    for (let i = 1; i < n; i++) {
      all.push(await startServerProcess({ ...opts, dataDir: first.dataDir }));
    }
  } catch (e) {
    await Promise.all(all.map((s) => s.kill()));
    throw e;
  }
  const lb = roundRobin(all.map((s) => s.url));
  const each = (f: (s: TestServer) => Promise<void>) => async () => {
    await lb.close();
    await Promise.all(all.map(f));
  };
  return {
    url: lb.url,
    port: lb.port,
    pid: first.pid,
    dataDir: first.dataDir,
    configPath: first.configPath,
    stop: each((s) => s.stop()),
    kill: each((s) => s.kill()),
    output: () => all.map((s, i) => `--- replica ${i} ---\n${s.output()}`).join("\n"),
  };
}

/** An HTTP load balancer on 127.0.0.1 sending each request to the next backend in turn. */
export function roundRobin(backends: string[]): {
  url: string;
  port: number;
  /** requests sent to each backend */
  counts: number[];
  close(): Promise<void>;
} {
  let next = 0;
  const counts = backends.map(() => 0);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const i = next++ % backends.length;
    counts[i]++;
    const u = new URL(req.url);
    try {
      return await fetch(`${backends[i]}${u.pathname}${u.search}`, {
        method: req.method,
        headers: req.headers,
        body: req.body,
        redirect: "manual",
      });
    } catch (e) {
      return new Response(`backend ${i}: ${(e as Error).message}`, { status: 502 });
    }
  });
  const port = server.addr.port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    counts,
    close: () => server.shutdown(),
  };
}

async function startServerProcess(opts: ServerOptions): Promise<TestServer> {
  const dataDir = opts.dataDir ?? await Deno.makeTempDir({ prefix: "wharf-test-" });
  const configPath = join(dataDir, "wharf.toml");
  const toml = `[server]
bind_address = "127.0.0.1"
port = ${opts.port ?? 0}
${opts.server ?? ""}

${opts.blobStore ?? defaultBlobStore(dataDir)}

[metadata_store]
path = ${JSON.stringify(opts.metadataPath ?? join(dataDir, "metadata.kv"))}

${opts.config ?? ""}
`;
  await Deno.writeTextFile(configPath, toml);
  // Suites asserting inline GET answers run on S3 with redirects off (an earlier config file,
  // so a test's own [global] still wins); the redirect tests turn them on themselves.
  const base: string[] = [];
  if (
    !opts.blobStore && Deno.env.get("WHARF_TEST_S3") && Deno.env.get("WHARF_TEST_S3_NO_REDIRECT")
  ) {
    const p = join(dataDir, "no-redirect.toml");
    await Deno.writeTextFile(
      p,
      "[global]\nenable_blob_redirect = false\nenable_manifest_redirect = false\n",
    );
    base.push("-c", p);
  }
  const child = wharfCommand(["serve", ...base, "-c", configPath, ...(opts.args ?? [])], {
    stdout: "piped",
    stderr: "piped",
    env: {
      RUST_BACKTRACE: "0",
      NO_COLOR: "1",
      WHARF_STRICT_KV_LIMITS: opts.unchecked ? "0" : "1",
      ...opts.env,
    },
  }).spawn();
  let out = "";
  let scheme = "http";
  let resolvePort: (p: number) => void;
  let rejectPort: (e: Error) => void;
  const portP = new Promise<number>((res, rej) => {
    resolvePort = res;
    rejectPort = rej;
  });
  // A server that logs without end must not take the test process with it: the output is kept
  // up to OUTPUT_KEPT characters (its start and its newest part), and a KV-limit violation is
  // caught as it streams past.
  let listening = false;
  let violation: string | null = null;
  let carry = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    const dec = new TextDecoder();
    for await (const chunk of s) {
      const text = dec.decode(chunk, { stream: true });
      out += text;
      if (violation === null) {
        const seen = carry + text;
        const i = seen.indexOf(KV_LIMIT_MARKER);
        if (i >= 0) violation = seen.slice(i, i + 2000);
        carry = seen.slice(-KV_LIMIT_MARKER.length);
      }
      if (!listening) {
        const m = /listening on (https?):\/\/[^:\s]+:(\d+)/.exec(out);
        if (m) {
          listening = true;
          scheme = m[1];
          resolvePort(Number(m[2]));
        }
      }
      if (out.length > 2 * OUTPUT_KEPT) {
        out = `${out.slice(0, OUTPUT_KEPT / 4)}\n[… output cut …]\n${out.slice(-OUTPUT_KEPT / 2)}`;
      }
    }
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  const status = child.status.then(async (s) => {
    // Its last words (the config error) may still be in the pipes when the exit is seen.
    if (!listening) await pumps.catch(() => {});
    rejectPort(new Error(`server exited (${s.code}) before listening:\n${out}`));
    return s;
  });
  const timer = setTimeout(
    () => rejectPort(new Error(`server did not start in 30s:\n${out}`)),
    30_000,
  );
  let port: number;
  try {
    port = await portP;
  } finally {
    clearTimeout(timer);
  }
  const finish = async (signal: Deno.Signal) => {
    try {
      child.kill(signal);
    } catch { /* already gone */ }
    await status;
    await pumps;
    assertNoKvLimitViolation(violation ?? "");
  };
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    pid: child.pid,
    port,
    dataDir,
    configPath,
    stop: () => finish("SIGTERM"),
    kill: () => finish("SIGKILL"),
    output: () => out,
  };
}

/**
 * Every test server runs with WHARF_STRICT_KV_LIMITS=1 (the test task sets it): a commit past
 * the strictest KV backend's limits is refused and printed with this marker, and the test that
 * ran the server fails here even if the request's 500 went unnoticed.
 */
export function assertNoKvLimitViolation(output: string): void {
  const i = output.indexOf(KV_LIMIT_MARKER);
  if (i >= 0) throw new Error(`the server broke a KV limit:\n${output.slice(i, i + 2000)}`);
}

/** Starts a server, runs `fn`, always stops it and removes the data dir. */
export async function withServer(
  opts: ServerOptions,
  fn: (s: TestServer) => Promise<void>,
): Promise<void> {
  const s = await startServer(opts);
  try {
    await fn(s);
  } finally {
    await s.stop();
    if (!opts.dataDir) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  }
}

export async function sha256Hex(data: Uint8Array): Promise<string> {
  const h = await crypto.subtle.digest("SHA-256", data as BufferSource);
  return Array.from(new Uint8Array(h), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Pushes a blob monolithically (POST ?digest=) and returns its digest. */
export async function pushBlob(url: string, ns: string, data: Uint8Array): Promise<string> {
  const digest = `sha256:${await sha256Hex(data)}`;
  const r = await fetch(`${url}/v2/${ns}/blobs/uploads/?digest=${digest}`, {
    method: "POST",
    body: data as BodyInit,
    headers: { "content-type": "application/octet-stream" },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`pushBlob ${ns} ${digest}: ${r.status}`);
  return digest;
}

/** Pushes a minimal image (config + one layer) and tags it; returns digests and the body. */
export async function pushImage(
  url: string,
  ns: string,
  tag: string,
  opts: { layer?: Uint8Array; extra?: Record<string, unknown> } = {},
): Promise<{ digest: string; body: Uint8Array; config: string; layer: string }> {
  const enc = new TextEncoder();
  const configBytes = enc.encode(JSON.stringify({ architecture: "amd64", os: "linux", tag }));
  const layerBytes = opts.layer ?? enc.encode(`layer of ${ns}:${tag} ${crypto.randomUUID()}`);
  const config = await pushBlob(url, ns, configBytes);
  const layer = await pushBlob(url, ns, layerBytes);
  const manifest = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: config,
      size: configBytes.length,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: layer,
      size: layerBytes.length,
    }],
    ...opts.extra,
  };
  const body = enc.encode(JSON.stringify(manifest));
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`pushImage ${ns}:${tag}: ${r.status}`);
  return { digest: `sha256:${await sha256Hex(body)}`, body, config, layer };
}

/**
 * Runs `main.ts <command> [args] -c <the server's config>` to completion (e.g. `scrub`), as its
 * task runs it (`deno task scrub`, `deno task wharf prune`).
 */
export async function runCli(
  s: TestServer,
  command: string,
  args: string[] = [],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await wharfCommand([command, ...args, "-c", s.configPath], {
    env: { RUST_BACKTRACE: "0", NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
  }).output();
  const dec = new TextDecoder();
  assertNoKvLimitViolation(dec.decode(out.stderr));
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/**
 * Waits until no queue holds a pending job: the background work a write caused (indexing,
 * scans, events) is done, so a timing that follows measures only what it names.
 */
export async function drainQueues(url: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // A job can cause one in a queue already looked at: done only when one pass finds none.
  for (;;) {
    let busy: string | null = null;
    for (const queue of JOB_QUEUES) {
      const r = await fetch(`${url}/v2/_svc/jobs/list?queue=${queue}&n=1`);
      if (r.status !== 200) throw new Error(`jobs/list ${queue}: ${r.status} ${await r.text()}`);
      if ((await r.json()).jobs.length > 0) busy ??= queue;
    }
    if (busy === null) return;
    if (Date.now() > deadline) throw new Error(`the ${busy} queue did not drain`);
    await new Promise((res) => setTimeout(res, 200));
  }
}
