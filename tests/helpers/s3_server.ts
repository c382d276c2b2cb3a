// A real S3-compatible server on 127.0.0.1 for tests and benches: @20minutes/s3rver (npm) run
// under Deno by tests/helpers/s3rver_main.ts, one bucket, its data in a temp dir. It checks
// SigV4 signatures against its one account (S3RVER / S3RVER).
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("./s3rver_main.ts", import.meta.url));

export interface TestS3 {
  endpoint: string;
  port: number;
  bucket: string;
  accessKeyId: string;
  secretKey: string;
  dir: string;
  pid: number;
  /** the `[blob_store.s3]` TOML table for a Wharf config pointing here */
  toml(extra?: string): string;
  /** stops the process, keeping its data (restart() brings it back on the same port) */
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** stops it for good and removes its data */
  close(): Promise<void>;
}

export async function startS3(
  opts: { bucket?: string; port?: number; laxSignatures?: boolean } = {},
): Promise<TestS3> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-s3-" });
  const bucket = opts.bucket ?? "wharf";
  let child: Deno.ChildProcess;
  let port = opts.port ?? 0;
  const spawn = async () => {
    child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        MAIN,
        join(dir, "data"),
        String(port),
        bucket,
        ...(opts.laxSignatures ? ["lax"] : []),
      ],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const dec = new TextDecoder();
    let out = "";
    const reader = child.stdout.getReader();
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) throw new Error(`s3rver exited before listening: ${out}`);
        out += dec.decode(r.value, { stream: true });
        const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
        if (m) {
          port = Number(m[1]);
          break;
        }
      }
    } finally {
      clearTimeout(timer);
    }
    // keep draining so the child never blocks on a full pipe
    (async () => {
      try {
        for (;;) if ((await reader.read()).done) break;
      } catch { /* gone */ }
    })();
    child.stderr.pipeTo(new WritableStream()).catch(() => {});
  };
  await spawn();
  let running = true;
  const stop = async () => {
    if (!running) return;
    running = false;
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
  };
  const endpoint = () => `http://127.0.0.1:${port}`;
  return {
    get endpoint() {
      return endpoint();
    },
    get port() {
      return port;
    },
    bucket,
    accessKeyId: "S3RVER",
    secretKey: "S3RVER",
    dir,
    get pid() {
      return child.pid;
    },
    toml(extra = "") {
      return `[blob_store.s3]
endpoint = "${endpoint()}"
bucket = "${bucket}"
region = "us-east-1"
access_key_id = "S3RVER"
secret_key = "S3RVER"
path_style = true
${extra}
`;
    },
    stop,
    async restart() {
      await stop();
      await spawn();
      running = true;
    },
    async close() {
      await stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
