// Manifest GET/PUT/DELETE (SPEC §Manifests rules 2-8), immutable tags and the receiving side
// of replication's last-writer-wins (X-Svc-Source-Timestamp rules 1-7).
import {
  isValidTag,
  manifestTooLarge,
  parseDigest,
  type ParsedManifest,
  parseManifest,
  RegistryError,
  rejectedWrite,
  truncate,
  unsettled,
} from "../oci/mod.ts";
import { type Config, repositoryOf } from "../config/mod.ts";
import { concatBytes, digestBytes } from "../streams/mod.ts";
import {
  type BlobStore,
  CorruptBlobError,
  countIntegrityFailure,
  mismatch,
} from "../storage/mod.ts";
import type { Quarantine } from "./quarantine.ts";
import { log } from "../log.ts";
import { INLINE_MANIFEST_MAX, type RevisionRecord, type TagRecord } from "../kv/mod.ts";
import { type BlobMeta, type ManifestMeta, type ManifestWrite } from "../metadata/mod.ts";
import type { UsageLedger } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { PushPlan, Signatures } from "./signatures.ts";
import { pusherOf, type ViewerIdentity } from "./signature_rules.ts";

export interface ManifestBody {
  digest: string;
  mediaType: string;
  size: number;
  /** null for HEAD when the body is not inline (no byte read needed), and with `redirect` */
  body: Uint8Array | null;
  /** a presigned URL of the body in the blob store, keeping the media type, for a 307 */
  redirect?: string;
}

export interface DeleteOptions {
  /**
   * By digest only: an entry every commit of the delete checks, read afresh for each, that
   * calls the delete off by throwing (the cache cap's pull stamp).
   */
  unlessChanged?: () => Promise<Deno.KvEntryMaybe<unknown>>;
  /**
   * By digest only: the tags the request was authorized to remove with the manifest; finding
   * another (created meanwhile) refuses the delete, 409 DENIED.
   */
  authorizedTags?: ReadonlySet<string>;
}

/** A revision whose body is not in the blob store (quarantined, or lost): 500 saying which. */
export class BodyUnavailableError extends RegistryError {
  constructor(detail: string) {
    super("INTERNAL_ERROR", detail);
  }
}

export interface PutInput {
  body: ReadableStream<Uint8Array> | null;
  contentLength: number | null;
  contentType: string | null;
  tags: string[];
  sourceTimestamp: string | null;
  /** who pushes: a held image (issue 34) is shown to its pusher */
  pusher?: ViewerIdentity | null;
}

/** Judgements a push repeats when signatures keep arriving while it commits. */
const JUDGE_ROUNDS = 4;

/**
 * `tag` parameters one push may carry. Beyond what one KV commit holds (~60 tags) a push takes
 * several commits; this bounds the work a single request can ask for.
 */
export const MAX_TAGS_PER_PUSH = 1000;

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** Rule 1: LWW applies only to a header that parses as RFC 3339; rule 6: future → now. */
export function parseSourceTimestamp(v: string | null): number | null {
  if (v === null || !RFC3339.test(v.trim())) return null;
  const t = Date.parse(v.trim());
  return Number.isFinite(t) ? Math.min(t, Date.now()) : null;
}

export class Manifests {
  /** signature verification (issue 34): set by the Registry once it is built */
  signing?: Signatures;

  constructor(
    private readonly cfg: Config,
    private readonly store: BlobStore,
    private readonly meta: ManifestMeta,
    private readonly blobs: BlobMeta,
    /** the jobs and events a push or delete causes, committed with it */
    private readonly effects: WriteEffects,
    /** quotas: each commit admitted by the ledger with the manifest's bytes (usage.ts) */
    private readonly usage?: UsageLedger,
    /** bodies that fail their digest are quarantined (quarantine.ts) */
    private readonly quarantine?: Pick<Quarantine, "quarantine" | "flagInline" | "explain">,
  ) {}

  async resolve(ns: string, reference: string): Promise<{ digest: string; rev: RevisionRecord }> {
    let digest = reference;
    if (!reference.includes(":")) {
      const t = await this.meta.tag(ns, reference);
      if (!t) throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}:${truncate(reference)}`);
      digest = t.digest;
    }
    const rev = await this.meta.revision(ns, digest);
    if (!rev) throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}@${truncate(reference)}`);
    return { digest, rev };
  }

  async get(
    ns: string,
    reference: string,
    withBody: boolean,
    redirect = false,
  ): Promise<ManifestBody> {
    const { digest, rev } = await this.resolve(ns, reference);
    return await this.serve(digest, rev, ns, withBody, redirect);
  }

  /** A resolved revision's answer: its body, a redirect to it, or (HEAD) its record alone. */
  async serve(
    digest: string,
    rev: RevisionRecord,
    ns: string,
    withBody: boolean,
    redirect: boolean,
  ): Promise<ManifestBody> {
    // Only bodies kept in the blob store can be redirected to; small ones live in KV.
    if (withBody && redirect && !rev.body && this.store.presign) {
      const url = await this.store.presign(digest, { contentType: rev.mediaType });
      return { digest, mediaType: rev.mediaType, size: rev.size, body: null, redirect: url };
    }
    // HEAD answers from the record (no bytes go out); a GET's body is checked (`body`).
    const body = withBody ? await this.body(digest, rev, ns) : rev.body ?? null;
    return { digest, mediaType: rev.mediaType, size: rev.size, body };
  }

  /**
   * The stored body of a revision (inline or in the blob store), checked against its digest on
   * every read: bytes that do not hash to it are never returned (500 naming the cause) and are
   * quarantined. `ns`: the revision's namespace, when the caller knows it.
   */
  async body(digest: string, rev: RevisionRecord, ns: string | null = null): Promise<Uint8Array> {
    const bytes = rev.body ?? await this.storedBody(digest);
    const found = mismatch(digest, bytes);
    if (found === null) return bytes;
    countIntegrityFailure("manifest");
    try {
      if (rev.body) await this.quarantine?.flagInline(ns, digest, found, bytes.byteLength);
      else await this.quarantine?.quarantine(digest);
    } catch (e) {
      log.error("could not quarantine a manifest body that failed verification", {
        digest,
        error: e instanceof Error ? e.message : String(e),
      });
    }
    throw new CorruptBlobError(digest, found, "manifest");
  }

  /** A body kept in the blob store; a missing one is a 500 saying why (quarantined, or lost). */
  private async storedBody(digest: string): Promise<Uint8Array> {
    try {
      return await this.store.readAll(digest);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      throw new BodyUnavailableError(
        (await this.quarantine?.explain(digest)) ??
          `the stored body of manifest ${digest} is missing from the blob store`,
      );
    }
  }

  async put(
    ns: string,
    reference: string,
    input: PutInput,
  ): Promise<{ digest: string; subject?: string; tags: string[]; held?: string }> {
    if (new Set(input.tags).size > MAX_TAGS_PER_PUSH) {
      await input.body?.cancel();
      throw new RegistryError("UNSUPPORTED", `at most ${MAX_TAGS_PER_PUSH} tag parameters`);
    }
    const bytes = await readLimited(
      input.body,
      input.contentLength,
      this.cfg.global.maxManifestSize,
    );
    const parsed = parseManifest(bytes, input.contentType);
    let digest: string;
    let tags: string[];
    const byDigest = parseDigest(reference);
    if (byDigest) {
      digest = digestBytes(byDigest.algorithm, bytes);
      if (digest !== reference) {
        throw new RegistryError("DIGEST_INVALID", `manifest does not hash to ${reference}`);
      }
      tags = [...new Set(input.tags)];
    } else {
      digest = digestBytes("sha256", bytes);
      tags = [reference];
    }
    const strict = !this.cfg.global.allowMissingManifestReferences;
    if (strict) await this.requireChildren(ns, parsed);
    // Required webhooks answer before anything (even an out-of-line body) is written.
    const fx = await this.effects.begin({ kind: "manifest-push", ns, digest, reference, tags });
    const { record, reserved } = await this.prepare(digest, bytes, parsed);
    const lww = byDigest ? null : parseSourceTimestamp(input.sourceTimestamp);
    const immutable = this.immutability(ns);
    const w: ManifestWrite = {
      ns,
      digest,
      record,
      parsed,
      tags,
      tagCreatedAt: lww ?? Date.now(),
      reserved,
      placed: () => this.store.exists(digest),
      requireBlobs: strict,
      guard: (tag, existing) => {
        if (!existing) return;
        if (lww !== null && existing.createdAt !== undefined && existing.createdAt > lww) {
          throw new RegistryError(
            "REPLICATION_SUPERSEDED",
            `tag ${tag} was written after the source event`,
          );
        }
        if (existing.digest !== digest && immutable(tag)) {
          throw rejectedWrite(`tag ${tag} is immutable`);
        }
      },
    };
    let plan: PushPlan | null = null;
    try {
      for (let round = 0;; round++) {
        plan = await this.judged(w, bytes, tags, input.pusher ?? null);
        try {
          await this.admitted(ns, digest, record.size, () => this.meta.commit(w, fx));
          break;
        } catch (e) {
          // A signature of this digest landed while the push was judged: judge it again.
          if (!(e instanceof StaleJudgement)) throw e;
          if (round + 1 >= JUDGE_ROUNDS) {
            throw unsettled(
              `signatures of ${digest} kept arriving while the push was judged: retry`,
              1,
            );
          }
        }
      }
    } finally {
      await fx.committed();
    }
    if (plan) await this.signing!.afterPush(ns, plan);
    if (plan?.held) return { digest, subject: parsed.subject, tags: [], held: plan.reason };
    return { digest, subject: parsed.subject, tags };
  }

  /**
   * The signature verdict of a push into a repository with [verify] (issue 34), judged before
   * its commit and pinned to the signatures it saw; a held push writes no tag yet.
   */
  private async judged(
    w: ManifestWrite,
    bytes: Uint8Array,
    tags: string[],
    pusher: ViewerIdentity | null,
  ): Promise<PushPlan | null> {
    const plan = await this.signing?.planPush({
      ns: w.ns,
      digest: w.digest,
      parsed: w.parsed,
      bytes,
      tags,
      pusher: pusherOf(pusher),
      guard: w.guard,
    }) ?? null;
    if (!plan) return null;
    w.tags = plan.tags;
    w.held = plan.held;
    w.head = plan.head;
    w.perTag = plan.perTag;
    w.pin = plan.pin === undefined ? undefined : {
      key: this.signing!.pinKey(w.ns, w.digest),
      versionstamp: plan.pin,
      stale: () => new StaleJudgement(),
    };
    return plan;
  }

  /** The revision record, with the body inline or (reserved and) written to the blob store. */
  private async prepare(
    digest: string,
    bytes: Uint8Array,
    parsed: ParsedManifest,
  ): Promise<{ record: RevisionRecord; reserved: string | null }> {
    const record: RevisionRecord = {
      mediaType: parsed.mediaType,
      size: bytes.byteLength,
      pushedAt: Date.now(),
    };
    if (parsed.subject) record.subject = parsed.subject;
    if (parsed.artifactType) record.artifactType = parsed.artifactType;
    if (bytes.byteLength <= INLINE_MANIFEST_MAX) {
      record.body = bytes;
      return { record, reserved: null };
    }
    const reserved = await this.blobs.reserve(digest, bytes.byteLength);
    await this.store.put(digest, bytes);
    return { record, reserved };
  }

  /**
   * Stores a manifest fetched from a pull-through upstream, byte-exact, under its verified
   * `digest`, and points `tag` at it when given. None of a client push's rules apply: the
   * repository is read-only for clients, its references arrive lazily, and a cached tag
   * follows the upstream. A body that is not a manifest is MANIFEST_INVALID.
   */
  async storeFetched(
    ns: string,
    digest: string,
    bytes: Uint8Array,
    contentType: string | null,
    tag: string | null,
  ): Promise<{ record: RevisionRecord; parsed: ParsedManifest }> {
    let parsed: ParsedManifest;
    try {
      parsed = parseManifest(bytes, null);
    } catch {
      // A body without its own mediaType is typed by the upstream's Content-Type.
      parsed = parseManifest(bytes, contentType);
    }
    const { record, reserved } = await this.prepare(digest, bytes, parsed);
    const fx = await this.effects.begin({ kind: "manifest-fetch", ns, digest });
    const w: ManifestWrite = {
      ns,
      digest,
      record,
      parsed,
      tags: tag === null ? [] : [tag],
      tagCreatedAt: Date.now(),
      reserved,
      placed: () => this.store.exists(digest),
      guard: () => {},
    };
    try {
      await this.admitted(ns, digest, record.size, () => this.meta.commit(w, fx));
    } finally {
      await fx.committed();
    }
    return { record, parsed };
  }

  /**
   * Rule 3: with allow_missing_manifest_references = false every reference must be readable.
   * Child manifests are checked here; blobs inside the commit (ManifestWrite.requireBlobs).
   */
  private async requireChildren(ns: string, parsed: ParsedManifest): Promise<void> {
    for (const c of parsed.children) {
      if (!(await this.meta.revision(ns, c.digest))) {
        throw new RegistryError("MANIFEST_BLOB_UNKNOWN", c.digest);
      }
    }
  }

  private admitted<T>(
    ns: string,
    digest: string,
    size: number,
    commit: () => Promise<T>,
  ): Promise<T> {
    return this.usage ? this.usage.admit(ns, digest, size, commit) : commit();
  }

  /** Whether a tag of `ns` may not move: repository setting over global, minus exclusions. */
  private immutability(ns: string): (tag: string) => boolean {
    const rc = repositoryOf(this.cfg, ns);
    const on = rc.immutableTags ?? this.cfg.global.immutableTags;
    const exclusions = rc.immutableTagsExclusions ?? this.cfg.global.immutableTagsExclusions;
    return (tag) => on && !exclusions.some((re) => re.test(tag));
  }

  /**
   * Whether deleting `tag` of `ns` (or a manifest it names) is refused: an immutable tag of a
   * hosted repository. A pull-through cache's tags follow its upstreams (a fetch moves them
   * too); its evictions and sync prunes delete them, and clients cannot write there at all.
   */
  isImmutable(ns: string, tag: string): boolean {
    if (repositoryOf(this.cfg, ns).upstreams?.length) return false;
    return this.immutability(ns)(tag);
  }

  /** Tags pointing at the revision `digest` of `ns` (a delete by digest removes them). */
  tagsOf(ns: string, digest: string): Promise<string[]> {
    return this.meta.tagsOf(ns, digest);
  }

  /**
   * DELETE of a tag or (by digest) a revision, refused (409 DENIED) when it would remove an
   * immutable tag (isImmutable): otherwise a delete and a push would move it.
   */
  async delete(
    ns: string,
    reference: string,
    sourceTimestamp: string | null,
    opts: DeleteOptions = {},
  ): Promise<void> {
    const lww = parseSourceTimestamp(sourceTimestamp);
    const guard = (tag: string, t: TagRecord) => {
      if (lww !== null && t.createdAt !== undefined && t.createdAt > lww) {
        throw new RegistryError(
          "REPLICATION_SUPERSEDED",
          "a tag was written after the source event",
        );
      }
      if (this.isImmutable(ns, tag)) {
        throw rejectedWrite(
          `tag ${tag} is immutable: neither it nor the manifest it names can be deleted`,
        );
      }
      if (opts.authorizedTags && !opts.authorizedTags.has(tag)) {
        throw rejectedWrite(`tag ${tag} was created while the delete was being authorized: retry`);
      }
    };
    if (!parseDigest(reference)) {
      if (!isValidTag(reference)) {
        throw new RegistryError("UNSUPPORTED", `invalid tag ${truncate(reference)}`);
      }
      const tagged = await this.meta.tag(ns, reference);
      const fx = await this.effects.begin({
        kind: "tag-delete",
        ns,
        tag: reference,
        digest: tagged?.digest ?? null,
        at: lww ?? Date.now(),
      });
      try {
        await this.meta.deleteTag(ns, reference, (t) => guard(reference, t), fx);
      } finally {
        await fx.committed();
      }
      return;
    }
    const rev = await this.meta.revision(ns, reference);
    if (!rev) throw new RegistryError("MANIFEST_UNKNOWN", reference);
    const parsed = parseManifest(await this.body(reference, rev), rev.mediaType);
    // A delete's jobs carry its event time: the source's timestamp when it was replicated.
    const fx = await this.effects.begin({
      kind: "manifest-delete",
      ns,
      digest: reference,
      at: lww ?? Date.now(),
    });
    try {
      await this.meta.deleteRevision({
        ns,
        digest: reference,
        parsed,
        guard,
        fx,
        unlessChanged: opts.unlessChanged,
      });
    } finally {
      await fx.committed();
    }
  }
}

/** The signatures a push was judged by changed before it committed. */
class StaleJudgement extends Error {}

/** Reads a request body of at most `max` bytes; more is 413 MANIFEST_INVALID. */
async function readLimited(
  body: ReadableStream<Uint8Array> | null,
  declared: number | null,
  max: number,
): Promise<Uint8Array> {
  const tooBig = () => manifestTooLarge(max);
  if (declared !== null && declared > max) {
    await body?.cancel();
    throw tooBig();
  }
  if (!body) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    for await (const chunk of body) {
      n += chunk.byteLength;
      if (n > max) throw tooBig();
      parts.push(chunk);
    }
  } catch (e) {
    if (e instanceof RegistryError) throw e;
    throw new RegistryError("MANIFEST_INVALID", "manifest body could not be read");
  }
  return concatBytes(parts, n);
}
