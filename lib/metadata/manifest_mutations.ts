// The pieces every manifest write is made of (manifest_writes.ts tells the plan): a push's
// description (ManifestWrite), the mutations of one tag or of a body's references, and the tag
// writes one commit carries, each checking its tag key as read.
import { type ParsedManifest, type Platform } from "../oci/mod.ts";
import {
  CommitBudget,
  K,
  type PlannedMutation,
  type RevisionRecord,
  type TagRecord,
} from "../kv/mod.ts";
import { type BytesPlaced } from "./blobs.ts";
import type { WriteFacts } from "./write_facts.ts";

export interface TagGuard {
  /** throws to refuse moving/creating `tag` given what is stored now */
  (tag: string, existing: TagRecord | null): void;
}

export interface ManifestWrite {
  ns: string;
  digest: string;
  record: RevisionRecord;
  parsed: ParsedManifest;
  tags: string[];
  tagCreatedAt: number;
  guard: TagGuard;
  /** the blob reservation of an out-of-line body (BlobMeta.reserve), null when inline */
  reserved: string | null;
  /** whether the out-of-line body is still in the blob store (see reservationAfterConflict) */
  placed: BytesPlaced;
  /**
   * allow_missing_manifest_references = false: the namespace must own every referenced blob
   * (requireOwned, read afresh on each attempt; the head commit checks its unlinkver).
   */
  requireBlobs?: boolean;
  /**
   * Signature verification (issue 34): the verdict this push commits was judged while `pin` was
   * at `versionstamp` (sigver: every signature of the digest and every verdict change rewrites
   * it). Each attempt reads it afresh and throws `stale()` when it moved (a signature arrived:
   * the caller judges again), and the head commit checks it.
   */
  pin?: { key: Deno.KvKey; versionstamp: string | null; stale: () => Error };
  /** the image is held (issue 34): its revision is not shown anywhere until released */
  held?: boolean;
  /** mutations the head commit carries besides the revision's (the verdict, held tags) */
  head?: PlannedMutation[];
  /** mutations each written tag carries (a held tag the push replaces) */
  perTag?: (tag: string) => PlannedMutation[];
  /**
   * Another revision's change that rides in the head commit (issue 34: a signature's push
   * releases the image it signs in its own commit). `add` runs on each attempt, after the
   * head's own mutations and before its tags, and adds its checks and mutations whole or not
   * at all, leaving `spare` checks for the tags; `landed` follows the head commit's landing.
   */
  alongside?: Alongside;
}

export interface Alongside {
  add(op: Deno.AtomicOperation, budget: CommitBudget, spare: number): Promise<void>;
  landed(): void;
}

/** Whether writing `tag` changes it: a write that changes nothing causes no job (no ping-pong). */
function tagChanges(w: ManifestWrite, existing: TagRecord | null): boolean {
  return !existing || existing.digest !== w.digest || existing.createdAt !== w.tagCreatedAt;
}

/**
 * The tag writes of one commit. Each checks its tag key as read and carries its mutations, the
 * revisions it leaves and joins getting their revtagver rewritten once per commit.
 */
export class TagCommit {
  private readonly touched: Set<string>;

  constructor(
    private readonly op: Deno.AtomicOperation,
    private readonly budget: CommitBudget,
    private readonly w: ManifestWrite,
    private readonly fx: WriteFacts,
    /** the revision, when this commit creates it: nobody read its revtagver to check */
    created: boolean,
  ) {
    this.touched = new Set(created ? [w.digest] : []);
  }

  /** Adds writing `tag` over `entry` (as read), guarded first; false when it does not fit. */
  add(tag: string, entry: Deno.KvEntryMaybe<TagRecord>): boolean {
    const { w, fx } = this;
    const existing = entry.value;
    w.guard(tag, existing);
    // Checks run out first (a tag's mutations are a few small keys): counted before its fact is
    // stated, so a tag left for the next commit states it there only.
    if (!this.budget.check(entry.key)) return false;
    const muts = tagMutations(w.ns, w.digest, tag, existing, w.tagCreatedAt, this.touched);
    if (w.perTag) muts.push(...w.perTag(tag));
    if (tagChanges(w, existing)) {
      const { ns, digest } = w;
      muts.push(...fx.mutationsFor({ kind: "tag-changed", ns, digest, tag, previous: existing }));
    }
    // A unit that does not fit ends the commit's tags, so what `touched` took for it is moot.
    if (!this.budget.addAll(this.op, muts)) return false;
    this.op.check(entry);
    return true;
  }
}

export const set = (key: Deno.KvKey, value: unknown): PlannedMutation => ({
  kind: "set",
  key,
  value,
});
export const del = (key: Deno.KvKey): PlannedMutation => ({ kind: "delete", key });

/** Platform strings are free-form in a manifest; the stored copy is cut so a value stays small. */
const PLATFORM_FIELD_MAX = 128;

function storedPlatform(p: Platform | undefined): Platform | null {
  if (!p) return null;
  const out: Platform = {
    os: p.os.slice(0, PLATFORM_FIELD_MAX),
    architecture: p.architecture.slice(0, PLATFORM_FIELD_MAX),
  };
  if (p.variant !== undefined) out.variant = p.variant.slice(0, PLATFORM_FIELD_MAX);
  return out;
}

/** The references a manifest body adds to its namespace. */
export function referenceMutations(ns: string, digest: string, parsed: ParsedManifest) {
  return [
    ...parsed.blobs.map((b) => set(K.bref(ns, b, digest), true)),
    ...parsed.children.map((c) => set(K.mref(ns, c.digest, digest), storedPlatform(c.platform))),
  ];
}

/**
 * Creating or moving `tag` of `ns` to `digest` (also the release of a held image's tags), with
 * the revtagver of each revision whose tags this changes, unless `touched` (the revisions the
 * commit already rewrites it for, updated here) has it.
 */
export function tagMutations(
  ns: string,
  digest: string,
  tag: string,
  existing: TagRecord | null,
  createdAt: number,
  touched: Set<string>,
): PlannedMutation[] {
  const out: PlannedMutation[] = [];
  if (existing && existing.digest !== digest) {
    out.push(del(K.tagrev(ns, existing.digest, tag)), ...touch(ns, existing.digest, touched));
  }
  out.push(set(K.tag(ns, tag), { digest, createdAt } satisfies TagRecord));
  out.push(set(K.tagrev(ns, digest, tag), true), ...touch(ns, digest, touched));
  return out;
}

/** Rewrites `digest`'s revtagver once per commit (`touched`): a delete of it checks it. */
function touch(ns: string, digest: string, touched: Set<string>): PlannedMutation[] {
  if (touched.has(digest)) return [];
  touched.add(digest);
  return [set(K.revTagVersion(ns, digest), true)];
}
