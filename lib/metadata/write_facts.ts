// What a metadata write tells the rest of Wharf about itself. The writes here do not know who
// listens (events, replication, index, scan: lib/effects composes them); they state each fact
// while they build a commit and add whatever mutations the listeners plan for it to that same
// atomic commit, so a job or event exists exactly when its cause was committed.
import type { ParsedManifest } from "../oci/mod.ts";
import type { PlannedMutation, TagRecord } from "../kv/mod.ts";

/** One thing a write did, stated while its commit is built. */
export type WriteFact =
  /** a manifest push reached its head commit (new revision or not) */
  | { kind: "manifest-pushed"; ns: string; digest: string }
  /** a revision that did not exist is created */
  | {
    kind: "revision-added";
    ns: string;
    digest: string;
    parsed: ParsedManifest;
    /** held until its signature arrives (issue 34): not shown anywhere yet */
    held?: boolean;
  }
  /** a held image was released (its signature verified); `tags`: the held tags written */
  | { kind: "image-released"; ns: string; digest: string; tags: string[] }
  /** `tag` is created or moved to `digest` (a rewrite that changes nothing is not a fact) */
  | { kind: "tag-changed"; ns: string; digest: string; tag: string; previous: TagRecord | null }
  | { kind: "tag-deleted"; ns: string; tag: string; digest: string }
  | { kind: "revision-removed"; ns: string; digest: string }
  | { kind: "blob-linked"; ns: string; digest: string }
  | { kind: "blob-unlinked"; ns: string; digest: string }
  /** a vulnerability report of `digest` was stored (lib/scan) */
  | { kind: "report-stored"; ns: string; digest: string };

/**
 * The one `effects` argument of a metadata write. A commit may conflict and be rebuilt: the write
 * calls `attempt()` before building each commit, so only what was planned for the commit that
 * landed (`landed()`) counts after the write.
 */
export interface WriteFacts {
  attempt(): void;
  /** the mutations `fact` causes, to add to the commit being built */
  mutationsFor(fact: WriteFact): PlannedMutation[];
  /** the commit built since the last `attempt()` committed */
  landed(): void;
}

/** For writes nobody listens to (tools that only read, unit tests of the metadata layer). */
export const NO_FACTS: WriteFacts = {
  attempt: () => {},
  mutationsFor: () => [],
  landed: () => {},
};
