// KV for in-process tests: a temp file opened with the strictest backend's limits enforced, so
// a module test fails on a commit that Deno Deploy or denokv would refuse; and a KV whose every
// commit a racing writer goes before.
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

/**
 * `kv` as a write under test sees it: before each of its commits `before(n)` runs on the KV
 * itself (n counts the commits from 1), a writer racing it; `outcomes` lists whether each of
 * its commits landed.
 */
export function racingKv(
  kv: Deno.Kv,
  before: (n: number) => unknown,
): { kv: Deno.Kv; outcomes: boolean[] } {
  const outcomes: boolean[] = [];
  let n = 0;
  const racing = new Proxy(kv, {
    get(target, prop) {
      if (prop !== "atomic") return Reflect.get(target, prop, target);
      return () => {
        const op = target.atomic();
        const commit = op.commit.bind(op);
        op.commit = async () => {
          await before(++n);
          const r = await commit();
          outcomes.push(r.ok);
          return r;
        };
        return op;
      };
    },
  });
  return { kv: racing, outcomes };
}
