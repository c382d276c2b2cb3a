// Quarantine (issue 38): a digest whose stored bytes do not hash to it is taken out of serving.
//
//   1. claim: scrub's reclamation marker (lib/metadata/reclaim.ts) plus a `claimed` record, if
//      blob/<d> is unchanged since the bytes were judged: writers that would place or link the
//      digest now answer 503 and retry, so nothing new lands under it unseen;
//   2. hash again under the claim (a writer that placed good bytes just before it wins: the
//      claim is given up, nothing is reported); still wrong → the store moves the bytes aside
//      and the marker and blob/<d> go (`moved`);
//   3. settle: each namespace's link goes (BLOB_UNKNOWN from then on, whose detail says why; a
//      re-push links it again), a pull-through namespace queues its `cache` fill, which fetches
//      the digest again from the upstream; then blob.corrupt events, a log line and the count.
//
// A process that dies in between leaves a record short of `settled`; `verify` finishes it.
// Manifest bodies kept in KV have no bytes to move: their record only notes them, and every
// read refuses them (Manifests.body) until a push or a refetch rewrites the revision.
import type { Config } from "../config/mod.ts";
import { QUARANTINE_NAMESPACES_KEPT, type QuarantineRecord } from "../kv/mod.ts";
import { QuarantineMeta, type UsageLedger } from "../metadata/mod.ts";
import { type BlobStore, countQuarantined, type IntegrityObject } from "../storage/mod.ts";
import { parseDigest, RegistryError } from "../oci/mod.ts";
import { Hasher } from "../streams/mod.ts";
import { type Actor, type Events, withActor } from "../events/mod.ts";
import { log } from "../log.ts";

export type QuarantineOutcome =
  /** taken out of serving (or noted, for a body kept in KV) */
  | { result: "quarantined"; rec: QuarantineRecord }
  /** the stored bytes hash to the digest */
  | { result: "ok" }
  /** a writer or a reclamation moved the digest meanwhile: judged again on the next pass */
  | { result: "raced" }
  /** nothing is stored under the digest */
  | { result: "gone" };

/** Waits as a rate limit requires before `bytes` more are read (verify's bytes_per_sec). */
export type Throttle = (bytes: number) => Promise<void>;

/** blob.corrupt events one quarantine sends at most (one per namespace concerned). */
const EVENTS_MAX = 100;
/** Who blob.corrupt events name as their cause. */
export const VERIFY_ACTOR: Actor = {
  username: "wharf-verify",
  id: null,
  provider: null,
  client_ip: null,
};

export interface QuarantineOptions {
  /** blob/<digest> as it was before the bytes were judged (default: read now, then hash) */
  seen?: Deno.KvEntryMaybe<unknown>;
  /** what the bytes hashed to when judged after `seen` (default: hashed now) */
  judged?: { found: string; size: number };
  throttle?: Throttle;
}

export interface QuarantineDeps {
  cfg: Config;
  kv: Deno.Kv;
  store: BlobStore;
  usage?: UsageLedger;
  events: Events;
  /** queues the `cache` fill that fetches `digest` into pull-through `ns` again */
  refetch(ns: string, digest: string): Promise<void>;
  /** whether `ns` is in a pull-through repository */
  pullThrough(ns: string): boolean;
}

export class Quarantine {
  readonly meta: QuarantineMeta;
  /** one quarantine per digest at a time in this process */
  private readonly running = new Map<string, Promise<QuarantineOutcome>>();

  constructor(private readonly d: QuarantineDeps) {
    this.meta = new QuarantineMeta(d.kv, d.usage);
  }

  /** Takes `digest` out of serving if its stored bytes do not hash to it. */
  quarantine(digest: string, opts: QuarantineOptions = {}): Promise<QuarantineOutcome> {
    const running = this.running.get(digest);
    if (running) return running;
    const p = this.run(digest, opts).finally(() => this.running.delete(digest));
    this.running.set(digest, p);
    return p;
  }

  private async run(digest: string, opts: QuarantineOptions): Promise<QuarantineOutcome> {
    const seen = opts.seen ?? await this.meta.blobEntry(digest);
    const first = opts.judged ?? await this.hash(digest, opts.throttle);
    if (!first) return { result: "gone" };
    if (first.found === digest) return { result: "ok" };
    const rec: QuarantineRecord = {
      at: Date.now(),
      stage: "claimed",
      kind: "blob",
      size: first.size,
      found: first.found,
      kept: false,
      namespaces: [],
      more: 0,
      refetch: [],
    };
    if (!(await this.meta.claim(digest, seen, rec))) return { result: "raced" };
    return await this.underClaim(digest, rec, opts.throttle);
  }

  /** Steps 2 and 3, the claim held (also when a verify finishes a claim whose process died). */
  private async underClaim(
    digest: string,
    rec: QuarantineRecord,
    throttle?: Throttle,
  ): Promise<QuarantineOutcome> {
    let again: { found: string; size: number } | null;
    try {
      again = await this.hash(digest, throttle);
    } catch (e) {
      await this.meta.release(digest);
      throw e;
    }
    if (again?.found === digest) {
      await this.meta.release(digest);
      return { result: "raced" };
    }
    const seen = await this.meta.blobEntry(digest);
    if (again) {
      rec.found = again.found;
      rec.size = again.size;
      try {
        rec.kept = await this.d.store.quarantine(digest);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) {
          await this.meta.release(digest);
          throw e;
        }
      }
    }
    // No bytes in place: they were moved before a process died, or reclaimed since.
    rec.stage = "moved";
    await this.meta.moved(digest, seen, rec);
    return { result: "quarantined", rec: await this.settle(digest, rec) };
  }

  /** Finishes a record left short of `settled` by a process that died (verify calls this). */
  async resume(digest: string, rec: QuarantineRecord): Promise<QuarantineOutcome> {
    if (rec.stage === "claimed") return await this.underClaim(digest, rec);
    if (rec.stage === "moved") {
      return { result: "quarantined", rec: await this.settle(digest, rec) };
    }
    return { result: "quarantined", rec };
  }

  /**
   * Step 3: unlinks the owners (stopping if the digest is placed again meanwhile), queues the
   * refetches, notes the namespaces, tells webhooks and the log.
   */
  private async settle(digest: string, rec: QuarantineRecord): Promise<QuarantineRecord> {
    const unlinked: string[] = [];
    let restored = false;
    owners: for (;;) {
      const batch = await this.meta.owners(digest, 100);
      if (batch.length === 0) break;
      for (const ns of batch) {
        const r = await this.meta.unlinkOne(digest, ns);
        if (r === "restored") {
          restored = true;
          break owners;
        }
        if (r === "unlinked") unlinked.push(ns);
      }
    }
    const bodies = await this.meta.bodyNamespaces(digest);
    if (unlinked.length === 0 && bodies.length > 0) rec.kind = "manifest";
    const all = [...new Set([...unlinked, ...bodies])];
    const refetch: string[] = [];
    for (const ns of all) {
      if (!this.d.pullThrough(ns)) continue;
      // A pull-through manifest is fetched again by its next GET (PullThrough.manifest).
      if (unlinked.includes(ns)) await this.d.refetch(ns, digest).catch(() => {});
      refetch.push(ns);
    }
    rec.namespaces = all.slice(0, QUARANTINE_NAMESPACES_KEPT);
    rec.more = all.length - rec.namespaces.length;
    rec.refetch = refetch.slice(0, QUARANTINE_NAMESPACES_KEPT);
    rec.stage = "settled";
    await this.meta.put(digest, rec);
    countQuarantined(rec.kind);
    log.error("quarantined: the stored bytes do not hash to their digest", {
      digest,
      found: rec.found,
      size: rec.size,
      object: rec.kind,
      kept: rec.kept,
      namespaces: all.length,
      refetch: refetch.length,
      restored_meanwhile: restored,
    });
    await this.notify(digest, rec.kind, rec, all, new Set(refetch));
    return rec;
  }

  private async notify(
    digest: string,
    object: IntegrityObject,
    rec: Pick<QuarantineRecord, "found" | "size">,
    namespaces: string[],
    refetch: Set<string>,
  ): Promise<void> {
    // Found by the server, not asked for by whoever's read tripped over it.
    await withActor(VERIFY_ACTOR, async () => {
      for (const ns of namespaces.slice(0, EVENTS_MAX)) {
        await this.d.events.corrupt(ns, digest, {
          object: object === "manifest" ? "manifest" : "blob",
          found: rec.found,
          size: rec.size,
          refetch: refetch.has(ns),
        }).catch(() => {});
      }
    });
  }

  /**
   * A manifest body kept in KV (revision of `ns`, or of a namespace not known here) that does
   * not hash to its digest: recorded, logged and told once.
   */
  async flagInline(ns: string | null, digest: string, found: string, size: number): Promise<void> {
    if (!(await this.meta.flagInline(ns ?? "", digest, found, size))) return;
    countQuarantined("manifest");
    const pt = ns !== null && this.d.pullThrough(ns);
    log.error("a manifest body kept in KV does not hash to its digest: not served", {
      digest,
      found,
      size,
      namespace: ns,
      refetch: pt,
    });
    if (ns !== null) {
      await this.notify(digest, "manifest", { found, size }, [ns], new Set(pt ? [ns] : []));
    }
  }

  /** Why `digest` is not served, when it was quarantined; null otherwise. */
  async explain(digest: string): Promise<string | null> {
    const rec = await this.meta.record(digest);
    return rec && rec.stage !== "claimed" ? quarantineDetail(digest, rec) : null;
  }

  /**
   * What is stored under `digest` hashes to, streamed (at most `throttle`'s pace); null when
   * nothing is stored under it.
   */
  async hash(
    digest: string,
    throttle?: Throttle,
  ): Promise<{ found: string; size: number } | null> {
    const d = parseDigest(digest);
    if (!d) throw new RegistryError("DIGEST_INVALID", digest);
    let stream: ReadableStream<Uint8Array>;
    try {
      stream = await this.d.store.read(digest);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return null;
      throw e;
    }
    const h = new Hasher(d.algorithm);
    try {
      for await (const chunk of stream) {
        h.update(chunk);
        await throttle?.(chunk.byteLength);
      }
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return null;
      throw e;
    }
    return { found: h.peek(), size: h.bytes };
  }
}

/** The detail an error about a quarantined digest carries. */
export function quarantineDetail(digest: string, rec: QuarantineRecord): string {
  const when = new Date(rec.at).toISOString();
  const then = rec.refetch.length > 0
    ? "a pull-through copy is fetched again from its upstream"
    : "push it again to restore it";
  return `${digest} was quarantined at ${when}: its stored bytes hash to ${rec.found}, not to its digest (${then})`;
}
