// The KV side of quarantine (lib/registry/quarantine.ts): a digest whose stored bytes do not hash
// to it is taken out of serving under scrub's reclamation marker (reclaim.ts), so every writer
// that would place or link the digest meanwhile answers 503 and retries; the bytes moved aside
// are the ones that were judged. Then its blob record goes and each namespace's link with it,
// one commit per namespace, each checking that no writer has placed the digest again since.
import {
  type BlobRecord,
  commitWithRetry,
  K,
  type LinkRecord,
  QUARANTINE_NAMESPACES_KEPT,
  type QuarantineRecord,
  type ReclaimMarker,
} from "../kv/mod.ts";
import type { UsageLedger } from "./usage.ts";

export type UnlinkOutcome = "unlinked" | "gone" | "restored";

export class QuarantineMeta {
  /** `usage`: repository usage, kept by the unlinking commits as by a blob delete */
  constructor(private readonly kv: Deno.Kv, private readonly usage?: UsageLedger) {}

  blobEntry(digest: string): Promise<Deno.KvEntryMaybe<BlobRecord>> {
    return this.kv.get<BlobRecord>(K.blob(digest));
  }

  async record(digest: string): Promise<QuarantineRecord | null> {
    return (await this.kv.get<QuarantineRecord>(K.quarantine(digest))).value;
  }

  async *records(): AsyncGenerator<{ digest: string; rec: QuarantineRecord }> {
    for await (
      const e of this.kv.list<QuarantineRecord>({ prefix: K.quarantineAll() }, { batchSize: 500 })
    ) yield { digest: e.key[1] as string, rec: e.value };
  }

  /**
   * Step 1: holds the reclamation marker of `digest` and records the claim, if blob/<digest> is
   * still as `seen` (versionstamp null: no record). False when it moved or a marker is held.
   */
  async claim(
    digest: string,
    seen: Deno.KvEntryMaybe<unknown>,
    rec: QuarantineRecord,
  ): Promise<boolean> {
    const r = await this.kv.atomic()
      .check({ key: K.blob(digest), versionstamp: seen.versionstamp })
      .check({ key: K.reclaim(digest), versionstamp: null })
      .set(K.reclaim(digest), { at: Date.now() } satisfies ReclaimMarker)
      .set(K.quarantine(digest), rec)
      .commit();
    return r.ok;
  }

  /** Gives a claim up (the bytes hash right after all, or are gone): marker and record go. */
  async release(digest: string): Promise<void> {
    const rec = await this.kv.get<QuarantineRecord>(K.quarantine(digest));
    const op = this.kv.atomic().delete(K.reclaim(digest));
    if (rec.value?.stage === "claimed") op.check(rec).delete(rec.key);
    await op.commit();
  }

  /**
   * Step 2, once the bytes are out of serving: the marker and the blob record go, the record says
   * moved. If blob/<digest> changed since `seen` (the marker outlived STALE_MARKER_MS and a writer
   * placed the digest again), that record stays: the record only notes the move.
   */
  async moved(
    digest: string,
    seen: Deno.KvEntryMaybe<unknown>,
    rec: QuarantineRecord,
  ): Promise<void> {
    const r = await this.kv.atomic()
      .check({ key: K.blob(digest), versionstamp: seen.versionstamp })
      .delete(K.blob(digest))
      .delete(K.reclaim(digest))
      .set(K.quarantine(digest), rec)
      .commit();
    if (!r.ok) await this.kv.set(K.quarantine(digest), rec);
  }

  /** Rewrites the record (a later stage, the namespaces found). */
  async put(digest: string, rec: QuarantineRecord): Promise<void> {
    await this.kv.set(K.quarantine(digest), rec);
  }

  /** Drops the record (an operator's release, or the digest stored whole again). */
  async drop(digest: string): Promise<void> {
    await this.kv.delete(K.quarantine(digest));
  }

  /**
   * A manifest body kept in KV that does not hash to its digest: recorded once (nothing to move;
   * every read refuses it until a push rewrites it). True when this call recorded it.
   */
  async flagInline(ns: string, digest: string, found: string, size: number): Promise<boolean> {
    const rec: QuarantineRecord = {
      at: Date.now(),
      stage: "settled",
      kind: "manifest",
      size,
      found,
      inline: true,
      kept: false,
      namespaces: [ns],
      more: 0,
      refetch: [],
    };
    const r = await this.kv.atomic().check({ key: K.quarantine(digest), versionstamp: null })
      .set(K.quarantine(digest), rec).commit();
    return r.ok;
  }

  /** Namespaces owning `digest` (links), in key order, at most `limit`. */
  async owners(digest: string, limit: number): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.owners(digest) }, { limit })) {
      out.push(e.key[2] as string);
    }
    return out;
  }

  /** Namespaces keeping a manifest body under `digest` in the blob store, at most `limit`. */
  async bodyNamespaces(digest: string, limit = QUARANTINE_NAMESPACES_KEPT): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.bodies(digest) }, { limit })) {
      out.push(e.key[2] as string);
    }
    return out;
  }

  /**
   * Step 3, for each owner: `ns` no longer owns `digest` (its usage shrinks, strict-mode pushes
   * see unlinkver move), unless blob/<digest> exists again: a re-push or a refetch is placing
   * the bytes, so the links stay ("restored").
   */
  async unlinkOne(digest: string, ns: string): Promise<UnlinkOutcome> {
    return await commitWithRetry<UnlinkOutcome>("quarantine unlink", async () => {
      const [link, blob] = await this.kv.getMany<[LinkRecord, BlobRecord]>([
        K.link(ns, digest),
        K.blob(digest),
      ]);
      if (blob.versionstamp !== null) return { done: "restored" };
      if (!link.value) {
        // An owner key without its link (scrub repairs those): nothing of ns to unlink.
        await this.kv.atomic().check(link).delete(K.owner(digest, ns)).commit();
        return { done: "gone" };
      }
      const op = this.kv.atomic().check(blob).check(link).delete(K.link(ns, digest))
        .delete(K.owner(digest, ns)).set(K.unlinkver(ns), true);
      (await this.usage?.planRemove(ns, digest, link.value.size))?.apply(op);
      return { op, value: "unlinked" };
    });
  }
}

/** Quarantine records now (stages past a bare claim), counted up to `cap` (metrics). */
export async function countQuarantines(kv: Deno.Kv, cap = 10_000): Promise<number> {
  let n = 0;
  for await (
    const e of kv.list<QuarantineRecord>({ prefix: K.quarantineAll() }, { limit: cap })
  ) if (e.value.stage !== "claimed") n++;
  return n;
}
