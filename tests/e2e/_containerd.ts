// A private containerd daemon for e2e tests: its root, state and socket live in one temp
// directory, so a test never touches the host's containerd or its images. `ctr` is the client.
import { join } from "node:path";
import type { Run } from "./_skopeo.ts";

function runs(cmd: string, args: string[]): boolean {
  try {
    return new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

/** Why containerd tests cannot run here, or null when they can. */
export function containerdMissing(): string | null {
  const missing: string[] = [];
  if (!runs("containerd", ["--version"])) missing.push("containerd");
  if (!runs("ctr", ["--version"])) missing.push("ctr");
  if (missing.length === 0 && Deno.uid() !== 0) missing.push("root (containerd runs as root)");
  if (missing.length === 0) return null;
  const reason = `missing ${missing.join(", ")} (apt-get install containerd)`;
  if (Deno.env.get("WHARF_REQUIRE_TOOLS") === "1") {
    throw new Error(`WHARF_REQUIRE_TOOLS=1 but the containerd e2e tests cannot run: ${reason}`);
  }
  console.warn(`SKIPPING containerd e2e tests: ${reason}`);
  return reason;
}

export interface CtrRun extends Run {
  /** stdout as bytes (`ctr content get` writes a blob there) */
  raw: Uint8Array;
}

export interface Containerd {
  dir: string;
  /** `ctr` against this daemon, in containerd namespace `ns` */
  ctr(ns: string, args: string[], timeoutMs?: number): Promise<CtrRun>;
  stop(): Promise<void>;
}

export async function startContainerd(): Promise<Containerd> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-ctd-" });
  const sock = join(dir, "containerd.sock");
  // Only what a pull and push need: no CRI, no metrics or debug listeners.
  await Deno.writeTextFile(
    join(dir, "config.toml"),
    `version = 2
root = ${JSON.stringify(join(dir, "root"))}
state = ${JSON.stringify(join(dir, "state"))}
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = ${JSON.stringify(sock)}
[ttrpc]
  address = ${JSON.stringify(sock + ".ttrpc")}
[debug]
  address = ""
[metrics]
  address = ""
`,
  );
  const child = new Deno.Command("containerd", {
    args: ["-c", join(dir, "config.toml")],
    stdout: "null",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  let log = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const c of child.stderr) log += dec.decode(c, { stream: true });
  })();
  const ctr = async (ns: string, args: string[], timeoutMs = 60_000): Promise<CtrRun> => {
    const out = await new Deno.Command("ctr", {
      args: ["--address", sock, "--namespace", ns, ...args],
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    const dec = new TextDecoder();
    return {
      code: out.code,
      stdout: dec.decode(out.stdout),
      stderr: dec.decode(out.stderr),
      raw: out.stdout,
    };
  };
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
    await pump.catch(() => {});
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  for (let i = 0;; i++) {
    if ((await ctr("default", ["version"], 5_000)).code === 0) break;
    if (i >= 100) {
      await stop();
      throw new Error(`containerd did not come up:\n${log.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { dir, ctr, stop };
}
