// A small filesystem for the fault tests: a tmpfs of a few MiB mounted on a temp directory (root
// only: CI runs as root, and under WHARF_REQUIRE_TOOLS=1 a machine that cannot mount fails the
// run instead of skipping it), filled to a chosen number of free bytes with a filler file and
// freed again.
import { statfsSync } from "node:fs";
import { join } from "node:path";

export interface SmallFs {
  dir: string;
  /** bytes free now (what a non-root writer could still use) */
  free(): number;
  /** writes filler until at most `leave` bytes are free (0: until the disk is full) */
  fill(leave?: number): Promise<void>;
  /** removes the filler */
  drain(): Promise<void>;
  /** makes the filesystem `bytes` big (a tmpfs remount: what an operator growing a disk does) */
  grow(bytes: number): Promise<void>;
  /** unmounts and removes the directory */
  close(): Promise<void>;
}

/** Why this machine cannot mount one (null: it can), checked once per test process. */
export const smallFsUnavailable: string | null = (() => {
  if (Deno.build.os !== "linux") return "tmpfs mounts need Linux";
  if (Deno.uid() !== 0) return "mounting a tmpfs needs root";
  return null;
})();

/** Deno.test's `ignore` for a test that needs a SmallFs (loud, and fatal in CI). */
export function ignoreWithoutSmallFs(name: string): boolean {
  if (smallFsUnavailable === null) return false;
  if (Deno.env.get("WHARF_REQUIRE_TOOLS") === "1") {
    throw new Error(`WHARF_REQUIRE_TOOLS=1 but ${name} cannot run: ${smallFsUnavailable}`);
  }
  console.error(`%cSKIPPED ${name}: ${smallFsUnavailable}`, "color: red");
  return true;
}

async function sh(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Mounts a tmpfs of `bytes` on a new temp directory. */
export async function mountSmallFs(bytes: number): Promise<SmallFs> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-smallfs-" });
  await sh("mount", ["-t", "tmpfs", "-o", `size=${bytes},mode=0755`, "tmpfs", dir]);
  const filler = join(dir, "filler");
  const free = () => {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  };
  return {
    dir,
    free,
    async fill(leave = 0) {
      const f = await Deno.open(filler, { write: true, create: true, append: true });
      const chunk = new Uint8Array(64 * 1024);
      try {
        for (;;) {
          const room = free() - leave;
          if (room <= 0) return;
          try {
            await f.write(chunk.subarray(0, Math.min(chunk.length, room)));
          } catch (e) {
            if ((e as { code?: string }).code === "ENOSPC") return;
            throw e;
          }
        }
      } finally {
        f.close();
      }
    },
    async drain() {
      await Deno.remove(filler).catch(() => {});
    },
    async grow(size: number) {
      await sh("mount", ["-o", `remount,size=${size}`, dir]);
    },
    async close() {
      // A server still holding files there keeps the mount busy: detach it lazily then.
      await sh("umount", [dir]).catch(() => sh("umount", ["-l", dir]));
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
