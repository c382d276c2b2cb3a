// A private Docker daemon for e2e tests: data root, exec root, its own managed containerd, the API
// socket and the CLI's config (credentials) all live in one temp directory; no networking setup
// (no iptables, no bridge) and the vfs storage driver, so it runs wherever root does.
import { join } from "node:path";
import type { Run } from "./_skopeo.ts";
import { missingReason, runs, startDaemon } from "./_tools.ts";

// Debian's CLI matches Debian's daemon; any other docker CLI on the PATH negotiates down.
const CLI = runs("/usr/bin/docker", ["--version"]) ? "/usr/bin/docker" : "docker";

/** Why the docker tests cannot run here, or null when they can. */
export function dockerMissing(): string | null {
  const missing: string[] = [];
  if (!runs("dockerd", ["--version"])) missing.push("dockerd");
  if (!runs(CLI, ["--version"])) missing.push("docker");
  if (missing.length === 0 && Deno.uid() !== 0) missing.push("root (dockerd runs as root)");
  return missingReason("docker", missing, "apt-get install docker.io");
}

export interface Docker {
  dir: string;
  docker(args: string[], opts?: { stdin?: string; timeoutMs?: number }): Promise<Run>;
  stop(): Promise<void>;
}

export interface DockerOptions {
  /** run the daemon (and so `--network host` containers) in the network namespace held by this
   * pid (tests/e2e/_netns.ts) */
  netnsPid?: number;
}

export async function startDocker(opts: DockerOptions = {}): Promise<Docker> {
  // Short: the managed containerd's socket path lives under exec-root (108-byte limit).
  const dir = await Deno.makeTempDir({ prefix: "wdk-" });
  const sock = join(dir, "d.sock");
  const env = { DOCKER_HOST: `unix://${sock}`, DOCKER_CONFIG: join(dir, "cli") };
  await Deno.mkdir(env.DOCKER_CONFIG);
  const args = [
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
  ];
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
  const ready = async () => (await docker(["version"], { timeoutMs: 5_000 })).code === 0;
  const [cmd, cmdArgs] = opts.netnsPid === undefined
    ? ["dockerd", args]
    : ["nsenter", ["-t", String(opts.netnsPid), "-n", "dockerd", ...args]];
  const daemon = await startDaemon(cmd, cmdArgs, ready).catch(async (e) => {
    await unmountUnder(dir);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw e;
  });
  const stop = async () => {
    await daemon.stop();
    // dockerd leaves its network namespace bind-mounted under the exec root (x/netns/default);
    // once that is gone the vfs layers and containerd's state are plain files.
    await unmountUnder(dir);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  return { dir, docker, stop };
}

/** Lazily unmounts every mount point under `dir`, deepest first. */
async function unmountUnder(dir: string): Promise<void> {
  let mounts: string;
  try {
    mounts = await Deno.readTextFile("/proc/self/mountinfo");
  } catch {
    return;
  }
  const points = mounts.split("\n").map((l) => l.split(" ")[4]).filter((m) =>
    m?.startsWith(`${dir}/`)
  ).sort((a, b) => b.length - a.length);
  for (const m of points) {
    await new Deno.Command("umount", { args: ["-l", m], stdout: "null", stderr: "null" }).output()
      .catch(() => {});
  }
}
