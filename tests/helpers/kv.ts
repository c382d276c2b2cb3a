// KV for in-process tests: a temp file opened with the strictest backend's limits enforced, so
// a module test fails on a commit that Deno Deploy or denokv would refuse.
import { enforceKvLimits, withBusyRetry } from "../../lib/kv/mod.ts";

export interface TestKv {
  kv: Deno.Kv;
  path: string;
  /** KV limit violations seen (each also failed its commit) */
  violations: string[];
  close(): Promise<void>;
}

export async function openTestKv(path?: string): Promise<TestKv> {
  const dir = path ? null : await Deno.makeTempDir({ prefix: "wharf-kv-" });
  const file = path ?? `${dir}/metadata.kv`;
  const raw = await Deno.openKv(file);
  const violations: string[] = [];
  const kv = withBusyRetry(enforceKvLimits(raw, (m) => violations.push(m)));
  return {
    kv,
    path: file,
    violations,
    close: async () => {
      raw.close();
      if (dir) await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
