// A private Docker daemon for e2e tests: data root, exec root, its own managed containerd, the API
// socket and the CLI's config (credentials) all live in one temp directory; no networking setup
// (no iptables, no bridge) and the vfs storage driver, so it runs wherever root does.
import { join } from "node:path";
import type { Run } from "./_skopeo.ts";

function runs(cmd: string, args: string[]): boolean {
  try {
    return new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

// Debian's CLI matches Debian's daemon; any other docker CLI on the PATH negotiates down.
const CLI = runs("/usr/bin/docker", ["--version"]) ? "/usr/bin/docker" : "docker";

/** Why the docker tests cannot run here, or null when they can. */
export function dockerMissing(): string | null {
  const missing: string[] = [];
  if (!runs("dockerd", ["--version"])) missing.push("dockerd");
  if (!runs(CLI, ["--version"])) missing.push("docker");
  if (missing.length === 0 && Deno.uid() !== 0) missing.push("root (dockerd runs as root)");
  if (missing.length === 0) return null;
  const reason = `missing ${missing.join(", ")} (apt-get install docker.io)`;
  if (Deno.env.get("WHARF_REQUIRE_TOOLS") === "1") {
    throw new Error(`WHARF_REQUIRE_TOOLS=1 but the docker e2e tests cannot run: ${reason}`);
  }
  console.warn(`SKIPPING docker e2e tests: ${reason}`);
  return reason;
}

export interface Docker {
  dir: string;
  docker(args: string[], opts?: { stdin?: string; timeoutMs?: number }): Promise<Run>;
  stop(): Promise<void>;
}

export async function startDocker(): Promise<Docker> {
  // Short: the managed containerd's socket path lives under exec-root (108-byte limit).
  const dir = await Deno.makeTempDir({ prefix: "wdk-" });
  const sock = join(dir, "d.sock");
  const env = { DOCKER_HOST: `unix://${sock}`, DOCKER_CONFIG: join(dir, "cli") };
  await Deno.mkdir(env.DOCKER_CONFIG);
  const child = new Deno.Command("dockerd", {
    args: [
      "--data-root",
      join(dir, "root"),
      "--exec-root",
      join(dir, "x"),
      "--pidfile",
      join(dir, "docker.pid"),
      "-H",
      `unix://${sock}`,
      "--iptables=false",
      "--ip6tables=false",
      "--bridge=none",
      "--storage-driver=vfs",
      "--containerd-namespace",
      "wharf-e2e",
      "--containerd-plugins-namespace",
      "wharf-e2e-plugins",
    ],
    stdout: "null",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  let log = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const c of child.stderr) log += dec.decode(c, { stream: true });
  })();
  const docker = async (
    args: string[],
    opts: { stdin?: string; timeoutMs?: number } = {},
  ): Promise<Run> => {
    const p = new Deno.Command(CLI, {
      args,
      env,
      stdout: "piped",
      stderr: "piped",
      stdin: opts.stdin === undefined ? "null" : "piped",
      signal: AbortSignal.timeout(opts.timeoutMs ?? 120_000),
    }).spawn();
    if (opts.stdin !== undefined) {
      const w = p.stdin.getWriter();
      await w.write(new TextEncoder().encode(opts.stdin));
      await w.close();
    }
    const out = await p.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  };
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
    await pump.catch(() => {});
    // vfs layers and the managed containerd's state are plain files once the daemon is gone.
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  for (let i = 0;; i++) {
    if ((await docker(["version"], { timeoutMs: 5_000 })).code === 0) break;
    if (i >= 150) {
      await stop();
      throw new Error(`dockerd did not come up:\n${log.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { dir, docker, stop };
}
