// Deletes a downstream can apply (issue 24, part 1). Registries other than Wharf often delete
// manifests by digest only (distribution 2.x answers a tag with 400 DIGEST_INVALID, Harbor and
// Quay delete artifacts by digest), and some refuse deletes altogether (405 UNSUPPORTED). A tag
// delete to such a downstream resolves the tag there and deletes that digest, unless a tag or an
// index Wharf still holds in the namespace needs it: then the tag cannot go on that registry,
// which is an outcome (`tag-delete-unsupported`), not a failure to retry. The downstream is a
// mirror and the local state the truth, so a digest delete there also removes any other
// downstream tag on that digest. What each downstream accepts is learned once (state.ts).
import type { DownstreamConfig } from "../config/mod.ts";
import { formatSourceTimestamp } from "../oci/mod.ts";
import type { DigestHolds, ManifestMeta } from "../metadata/mod.ts";
import { type DownstreamClient, type Unsupported, type WriteOutcome } from "./client.ts";
import type { DownstreamState } from "./state.ts";

export type DeleteOutcome =
  | "deleted"
  | "superseded"
  | "skipped"
  | "tag-delete-unsupported"
  | "delete-unsupported";

export interface DeleteResult {
  outcome: DeleteOutcome;
  /** why a delete could not be applied, in the downstream's words where it gave some */
  detail?: string;
}

interface Target {
  cfg: DownstreamConfig;
  client: DownstreamClient;
  /** the namespace's name on the downstream */
  name: string;
}

export class DownstreamDeletes {
  constructor(
    /** the local tags: one re-created since its delete is not deleted downstream */
    private readonly tags: Pick<ManifestMeta, "tag">,
    /** what of the namespace still needs a digest (a tag, an index) */
    private readonly holds: Pick<DigestHolds, "tag" | "index">,
    private readonly state: Pick<DownstreamState, "caps" | "learn">,
  ) {}

  /** Removes `ns:tag` (deleted locally at `at`) from the downstream, by tag or by digest. */
  async deleteTag(t: Target, ns: string, tag: string, at: number): Promise<DeleteResult> {
    // Re-created here since: its push job brings the downstream in line; deleting now could
    // remove the new digest there.
    if ((await this.tags.tag(ns, tag)) !== null) return { outcome: "skipped" };
    const caps = await this.state.caps(t.cfg.name, t.cfg.url);
    let refused: string | null = null;
    if (caps.tagDelete !== false) {
      const r = await t.client.deleteManifest(t.name, tag, iso(at));
      if (!isUnsupported(r)) {
        if (r === "written" && caps.tagDelete === null) {
          await this.state.learn(t.cfg.name, t.cfg.url, { tagDelete: true });
        }
        return { outcome: done(r) };
      }
      refused = r.unsupported;
      await this.state.learn(t.cfg.name, t.cfg.url, { tagDelete: false });
    }
    const digest = await t.client.resolve(t.name, tag);
    if (digest === null) return { outcome: "deleted" };
    const need = await this.neededLocally(ns, digest);
    if (need !== null) {
      return {
        outcome: "tag-delete-unsupported",
        detail: `${t.name}:${tag} kept on ${t.cfg.name}: it deletes by digest only${
          refused ? ` (${refused})` : ""
        }, and ${need} still needs ${digest}`,
      };
    }
    return await this.deleteDigest(t, digest, at);
  }

  /** DELETE by digest, with the delete's time for a downstream that applies LWW (SPEC rule 3). */
  async deleteDigest(t: Target, digest: string, at: number): Promise<DeleteResult> {
    const r = await t.client.deleteManifest(t.name, digest, iso(at));
    if (isUnsupported(r)) {
      await this.state.learn(t.cfg.name, t.cfg.url, { digestDelete: false });
      return { outcome: "delete-unsupported", detail: r.unsupported };
    }
    if (r === "written") await this.state.learn(t.cfg.name, t.cfg.url, { digestDelete: true });
    return { outcome: done(r) };
  }

  /** A local tag or index of `ns` that holds `digest` (named for the message), else null. */
  private async neededLocally(ns: string, digest: string): Promise<string | null> {
    const tag = await this.holds.tag(ns, digest);
    if (tag !== null) return `local tag ${ns}:${tag}`;
    const index = await this.holds.index(ns, digest);
    if (index !== null) return `local index ${ns}@${index}`;
    return null;
  }
}

function isUnsupported(r: WriteOutcome | Unsupported): r is Unsupported {
  return typeof r === "object";
}

function done(r: WriteOutcome): DeleteOutcome {
  return r === "superseded" ? "superseded" : "deleted";
}

function iso(ms: number): string {
  return formatSourceTimestamp(ms);
}
