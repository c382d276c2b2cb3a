// The reclamation marker protocol (DESIGN.md §Reclamation). Deleting bytes is never "refcount
// hit zero → delete": that races a push that references the digest a moment later. Instead:
//
//   scrub:  1. commit reclaim/<d>, checking blob/<d> is unchanged since it judged it unreferenced
//           2. re-list owner/<d>/* and body/<d>/*: a reference committed before step 1 shows here
//           3. delete the bytes, then blob/<d> and the marker in one commit
//   writer: every commit that makes a namespace reference <d> checks reclaim/<d> is absent, so a
//           reference committed after step 1 is refused (503 RECLAMATION_IN_PROGRESS) instead of
//           pointing at bytes about to vanish.
//
// A marker outlives its scrub only if that scrub died between 1 and 3; writers lift a marker
// older than STALE_MARKER_MS (the next scrub also finishes or lifts it).
import { reclaiming, type RegistryError } from "../oci/mod.ts";
import { K, type ReclaimMarker } from "../kv/mod.ts";

// A live claim lasts one reclamation (a few KV round trips and one unlink: milliseconds), so a
// minute means its scrub died; a server killed mid-scrub should not refuse pushes for longer.
export const STALE_MARKER_MS = 60_000;
const RETRY_AFTER_SECS = 2;

export function reclaimingError(digest: string): RegistryError {
  return reclaiming(digest, RETRY_AFTER_SECS);
}

/** Adds "no reclamation of `digest` is under way" to a writer's commit. */
export function checkNotReclaiming(op: Deno.AtomicOperation, digest: string): void {
  op.check({ key: K.reclaim(digest), versionstamp: null });
}

/**
 * After a writer's commit failed: if one of `digests` is being reclaimed, throws 503 (or lifts a
 * stale marker and returns so the writer retries). Returns quietly when no marker explains it.
 */
export async function explainConflict(kv: Deno.Kv, digests: string[]): Promise<void> {
  for (const d of digests) {
    const m = await kv.get<ReclaimMarker>(K.reclaim(d));
    if (!m.value) continue;
    if (Date.now() - m.value.at > STALE_MARKER_MS) {
      await kv.atomic().check(m).delete(m.key).commit();
      continue;
    }
    throw reclaimingError(d);
  }
}

export class ReclaimMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /**
   * Step 1: claims `digest` for deletion if blob/<digest> is still as scrub saw it (`seen` is
   * that entry; versionstamp null means "no record", for orphan bytes). False when it moved.
   */
  async claim(digest: string, seen: Deno.KvEntryMaybe<unknown>): Promise<boolean> {
    const r = await this.kv.atomic()
      .check({ key: K.blob(digest), versionstamp: seen.versionstamp })
      .check({ key: K.reclaim(digest), versionstamp: null })
      .set(K.reclaim(digest), { at: Date.now() } satisfies ReclaimMarker)
      .commit();
    return r.ok;
  }

  /** Step 2: whether any namespace owns the digest or keeps a manifest body under it. */
  async referenced(digest: string): Promise<boolean> {
    for await (const _ of this.kv.list({ prefix: K.owners(digest) }, { limit: 1 })) return true;
    for await (const _ of this.kv.list({ prefix: K.bodies(digest) }, { limit: 1 })) return true;
    return false;
  }

  /** Step 3 (after the bytes are gone): the blob record and the marker go together. */
  async finish(digest: string): Promise<void> {
    await this.kv.atomic().delete(K.blob(digest)).delete(K.reclaim(digest)).commit();
  }

  /** Gives up a claim (a reference appeared in step 2). */
  async release(digest: string): Promise<void> {
    await this.kv.delete(K.reclaim(digest));
  }

  async *markers(): AsyncGenerator<{ digest: string; at: number }> {
    for await (const e of this.kv.list<ReclaimMarker>({ prefix: K.reclaimAll() })) {
      yield { digest: e.key[1] as string, at: e.value.at };
    }
  }
}
