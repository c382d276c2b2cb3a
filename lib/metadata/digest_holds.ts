// What in a namespace still holds a manifest digest, for the folders that act on a digest after
// the fact: the report heal pass (which namespace holds a revision of a report's image) and
// replication's deletes (a tag or an index that still needs the digest a downstream would drop).
// Read-only, and bounded: one getMany per ten digests, one key per question.
import { K } from "../kv/mod.ts";

/** KV's getMany takes at most 10 keys. */
export const GET_MANY = 10;

export class DigestHolds {
  constructor(private readonly kv: Deno.Kv) {}

  /** Which of `digests` (at most GET_MANY) `ns` holds a revision of, in their order. */
  async revisions(ns: string, digests: string[]): Promise<boolean[]> {
    if (digests.length > GET_MANY) throw new RangeError(`at most ${GET_MANY} digests a read`);
    const revs = await this.kv.getMany(digests.map((digest) => K.rev(ns, digest)));
    return revs.map((r) => r.value !== null);
  }

  /** A tag of `ns` pointing at `digest`, or null. */
  async tag(ns: string, digest: string): Promise<string | null> {
    for await (const e of this.kv.list({ prefix: K.tagrevs(ns, digest) }, { limit: 1 })) {
      return String(e.key[3]);
    }
    return null;
  }

  /** An index of `ns` listing `digest` as a child, or null. */
  async index(ns: string, digest: string): Promise<string | null> {
    for await (const e of this.kv.list({ prefix: K.mrefs(ns, digest) }, { limit: 1 })) {
      return String(e.key[3]);
    }
    return null;
  }
}
