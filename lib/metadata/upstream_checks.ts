// When each cached tag of a pull-through namespace was last confirmed against its upstream, so
// a repository's revalidate_secs can skip the upstream HEAD for a tag checked that recently.
// Advisory: a lost or stale record only costs one more HEAD. Blind writes, no guard needed.
import { K, type UpstreamCheck } from "../kv/mod.ts";

export class UpstreamChecks {
  constructor(private readonly kv: Deno.Kv) {}

  async get(ns: string, tag: string): Promise<UpstreamCheck | null> {
    return (await this.kv.get<UpstreamCheck>(K.upcheck(ns, tag))).value;
  }

  async record(ns: string, tag: string, digest: string, at = Date.now()): Promise<void> {
    await this.kv.set(K.upcheck(ns, tag), { at, digest } satisfies UpstreamCheck);
  }
}
