// Shared plumbing for podman e2e tests: tool detection (skip vs. fail under WHARF_REQUIRE_TOOLS=1)
// and a podman whose image store, run state, auth files and signature policy all live in one temp
// directory, so a test never reads or writes the host's containers configuration or images.
import { join } from "node:path";
import type { Run } from "./_skopeo.ts";
import { missingReason, runs } from "./_tools.ts";

/** Why podman tests cannot run here, or null when they can. */
export function podmanMissing(): string | null {
  const missing = runs("podman", ["--version"]) ? [] : ["podman"];
  return missingReason("podman", missing, "apt-get install podman");
}

/**
 * pull and push verify against a policy.json; a fresh machine's /etc/containers/policy.json is
 * not ours to rely on, and no environment variable points elsewhere, so the flag goes in.
 */
function withPolicy(args: string[], policy: string): string[] {
  if (args[0] !== "pull" && args[0] !== "push") return args;
  return [args[0], "--signature-policy", policy, ...args.slice(1)];
}

export interface Podman {
  dir: string;
  /** an auth file private to this podman; `podman login --authfile` writes it */
  authfile(name: string): string;
  run(args: string[], timeoutMs?: number): Promise<Run>;
  cleanup(): Promise<void>;
}

/**
 * A podman confined to a temp dir. vfs needs no overlay or fuse support from the sandbox, and
 * `--events-backend none` avoids journald, which containers and CI machines often lack.
 */
export async function makePodman(): Promise<Podman> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-podman-" });
  const policy = join(dir, "policy.json");
  await Deno.writeTextFile(policy, `{"default":[{"type":"insecureAcceptAnything"}]}`);
  // Fully qualified references only: no search registries, so a typo never reaches docker.io.
  const registries = join(dir, "registries.conf");
  await Deno.writeTextFile(registries, `unqualified-search-registries = []\n`);
  const global = [
    "--root",
    join(dir, "root"),
    "--runroot",
    join(dir, "runroot"),
    "--tmpdir",
    join(dir, "tmp"),
    "--storage-driver",
    "vfs",
    "--events-backend",
    "none",
    "--cgroup-manager",
    "cgroupfs",
  ];
  const emptyAuth = join(dir, "none.json");
  await Deno.writeTextFile(emptyAuth, `{"auths":{}}`);
  return {
    dir,
    authfile: (name) => join(dir, `${name}.json`),
    run: async (args, timeoutMs = 60_000) => {
      const out = await new Deno.Command("podman", {
        args: [...global, ...withPolicy(args, policy)],
        stdout: "piped",
        stderr: "piped",
        stdin: "null",
        env: {
          // Commands that take no --authfile still must not see the host's credentials.
          REGISTRY_AUTH_FILE: emptyAuth,
          CONTAINERS_REGISTRIES_CONF: registries,
          XDG_RUNTIME_DIR: join(dir, "xdg"),
        },
        signal: AbortSignal.timeout(timeoutMs),
      }).output();
      const dec = new TextDecoder();
      return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
    },
    cleanup: async () => {
      // vfs layers hold root-owned, read-only and setuid files; a plain recursive remove copes
      // as root, and `podman system reset` would touch more than this directory.
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
