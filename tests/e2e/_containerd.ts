// A private containerd daemon for e2e tests: its root, state and socket live in one temp
// directory, so a test never touches the host's containerd or its images. `ctr` is the client.
import { join } from "node:path";
import type { Run } from "./_skopeo.ts";
import { missingReason, runs, startDaemon } from "./_tools.ts";

/** Why containerd tests cannot run here, or null when they can. */
export function containerdMissing(): string | null {
  const missing: string[] = [];
  if (!runs("containerd", ["--version"])) missing.push("containerd");
  if (!runs("ctr", ["--version"])) missing.push("ctr");
  if (missing.length === 0 && Deno.uid() !== 0) missing.push("root (containerd runs as root)");
  return missingReason("containerd", missing, "apt-get install containerd");
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
  const ready = async () => (await ctr("default", ["version"], 5_000)).code === 0;
  const daemon = await startDaemon("containerd", ["-c", join(dir, "config.toml")], ready)
    .catch(async (e) => {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw e;
    });
  const stop = async () => {
    await daemon.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  return { dir, ctr, stop };
}
