// Putting manifests (SPEC §Manifests rules 3-8): a client's push (its body read within the size
// limit, its digest and references checked, its tags guarded by immutability and replication's
// last-writer-wins, its signature verdict judged before the commit) and a manifest a
// pull-through cache fetched, stored as served.
import {
  eventTime,
  manifestTooLarge,
  parseDigest,
  type ParsedManifest,
  parseManifest,
  parseSourceTimestamp,
  RegistryError,
  rejectedWrite,
  unsettled,
} from "../oci/mod.ts";
import { concatBytes, digestBytes } from "../streams/mod.ts";
import { INLINE_MANIFEST_MAX, type RevisionRecord } from "../kv/mod.ts";
import { type ManifestWrite } from "../metadata/mod.ts";
import type { PushPlan, Signatures } from "./signatures.ts";
import { pusherOf, type ViewerIdentity } from "./signature_rules.ts";
import type { ManifestDeps } from "./manifest_read.ts";
import type { ManifestDeletes } from "./manifest_delete.ts";

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

/** PUT of a manifest, and the store of a fetched one. */
export class ManifestPuts {
  /** signature verification (issue 34): set by the Registry once it is built */
  signing?: Signatures;

  constructor(
    private readonly d: ManifestDeps,
    private readonly deletes: ManifestDeletes,
  ) {}

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
      this.d.cfg.global.maxManifestSize,
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
    const strict = !this.d.cfg.global.allowMissingManifestReferences;
    if (strict) await this.requireChildren(ns, parsed);
    // Required webhooks answer before anything (even an out-of-line body) is written.
    const fx = await this.d.effects.begin({ kind: "manifest-push", ns, digest, reference, tags });
    const { record, reserved } = await this.prepare(digest, bytes, parsed);
    const lww = byDigest ? null : parseSourceTimestamp(input.sourceTimestamp);
    const immutable = this.deletes.immutability(ns);
    const w: ManifestWrite = {
      ns,
      digest,
      record,
      parsed,
      tags,
      tagCreatedAt: lww ?? eventTime(),
      reserved,
      placed: () => this.d.store.exists(digest),
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
    let pushed = false;
    try {
      for (let round = 0;; round++) {
        // A judgement of an earlier round was never committed: its scope closes unused.
        await plan?.alongside?.finish(false);
        plan = await this.judged(w, bytes, tags, input.pusher ?? null);
        try {
          await this.admitted(ns, digest, record.size, () => this.d.meta.commit(w, fx));
          pushed = true;
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
      if (!pushed) await plan?.alongside?.finish(false);
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
    w.alongside = plan?.alongside;
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
    const reserved = await this.d.blobs.reserve(digest, bytes.byteLength);
    await this.d.store.put(digest, bytes);
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
    const fx = await this.d.effects.begin({ kind: "manifest-fetch", ns, digest });
    const w: ManifestWrite = {
      ns,
      digest,
      record,
      parsed,
      tags: tag === null ? [] : [tag],
      tagCreatedAt: eventTime(),
      reserved,
      placed: () => this.d.store.exists(digest),
      guard: () => {},
    };
    try {
      await this.admitted(ns, digest, record.size, () => this.d.meta.commit(w, fx));
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
      if (!(await this.d.meta.revision(ns, c.digest))) {
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
    return this.d.usage ? this.d.usage.admit(ns, digest, size, commit) : commit();
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
