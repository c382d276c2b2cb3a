// Prune (issue 14): deletes the tags no retention rule keeps, through the registry's normal
// delete path (events fire, replication follows, scrub later reclaims bytes), then the
// manifests those deletes left without any tag. Protected, and kept with their tags: a
// manifest an index of the namespace names (an index child) and a manifest with referrers.
// An immutable tag is protected too (its delete would be refused), and with it its manifest.
import type { Config } from "../config/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import { hasAny, K, type TagRecord } from "../kv/mod.ts";
import type { Registry } from "../registry/mod.ts";
import { withActor } from "../events/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import { log } from "../log.ts";
import type { ProgressSink } from "../jobs/mod.ts";
import { compileRetention, type ImageFacts, type RetentionRules } from "./rules.ts";

export interface PruneOptions {
  dryRun?: boolean;
  /** the clock rules see (ms since the epoch); default Date.now() */
  now?: number;
  /** one line per decision that deletes or protects */
  report?: (line: string) => void;
  /** namespaces walked of all there are, tags judged and deleted (the CLI's progress line) */
  progress?: ProgressSink;
  signal?: AbortSignal;
}

export interface PruneSummary {
  namespaces: number;
  tags: number;
  kept: number;
  /** tags deleted (would be, in a dry run) */
  deleted: number;
  /** manifests deleted after their last tag went */
  manifests: number;
  /** tags no rule kept whose manifest is protected */
  protected: number;
  /** rules that errored and kept their tag (fail-open) */
  ruleErrors: number;
  /** deletes that failed (the tag stays; the next run tries again) */
  failures: number;
  seconds: number;
}

/** What prune works with, handed in by its callers (the prune command, serve's schedule). */
export interface PruneDeps {
  /** namespaces, tags, pull times, index children and referrers it judges by */
  kv: Deno.Kv;
  /** the normal delete path its deletes take (events, replication), and the tags it refuses */
  manifests: Pick<Registry["manifests"], "delete" | "isImmutable">;
}

/** Tag deletes in flight at once within a namespace. */
const DELETE_CONCURRENCY = 8;

/** The identity prune's deletes are attributed to in events. */
export const PRUNE_ACTOR = { username: "wharf-retention", id: null, client_ip: null };

export async function prune(
  cfg: Config,
  deps: PruneDeps,
  opts: PruneOptions = {},
): Promise<PruneSummary> {
  const t0 = performance.now();
  const rules = compileRetention(cfg);
  const now = opts.now ?? Date.now();
  const s: PruneSummary = {
    namespaces: 0,
    tags: 0,
    kept: 0,
    deleted: 0,
    manifests: 0,
    protected: 0,
    ruleErrors: 0,
    failures: 0,
    seconds: 0,
  };
  if (rules.size > 0) {
    // Counted first (one listing of the category index), so the walk has a total.
    let total = 0;
    if (opts.progress) {
      for await (const _ of deps.kv.list({ prefix: K.nsAll() }, { batchSize: 1000 })) total++;
    }
    let walked = 0;
    const tell = () =>
      opts.progress?.({
        unit: "namespaces",
        done: walked,
        total: Math.max(total, walked),
        note: `${s.tags} tag(s) judged, ${s.deleted} ${opts.dryRun ? "to delete" : "deleted"}`,
      });
    await withActor(PRUNE_ACTOR, async () => {
      for await (const e of deps.kv.list({ prefix: K.nsAll() }, { batchSize: 500 })) {
        if (opts.signal?.aborted) break;
        const ns = e.key[1] as string;
        const rc = repositoryOf(cfg, ns);
        const policy = rules.get(rc.retentionPolicy ? rc.name : "");
        if (policy) {
          s.namespaces++;
          await pruneNamespace(deps, ns, policy, now, opts, s);
        }
        walked++;
        tell();
      }
    });
  }
  s.seconds = (performance.now() - t0) / 1000;
  return s;
}

async function pruneNamespace(
  { kv, manifests }: PruneDeps,
  ns: string,
  rules: RetentionRules,
  now: number,
  opts: PruneOptions,
  s: PruneSummary,
): Promise<void> {
  const images: ImageFacts[] = [];
  for await (const e of kv.list<TagRecord>({ prefix: K.tags(ns) }, { batchSize: 1000 })) {
    images.push({
      tag: e.key[2] as string,
      digest: e.value.digest,
      namespace: ns,
      pushedAt: e.value.createdAt ?? 0,
      lastPulledAt: 0,
      pushedRank: 0,
      pulledRank: 0,
    });
  }
  if (images.length === 0) return;
  const pulls = new Map<string, number>();
  for (const d of new Set(images.map((i) => i.digest))) {
    const v = (await kv.get<Deno.KvU64>(K.lastPull(ns, d))).value;
    pulls.set(d, v ? Number(v.value) : 0);
  }
  for (const img of images) img.lastPulledAt = pulls.get(img.digest) ?? 0;
  // Ties are broken by tag name so a ranking never depends on listing order.
  const byTag = (a: ImageFacts, b: ImageFacts) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0);
  [...images].sort((a, b) => b.pushedAt - a.pushedAt || byTag(a, b))
    .forEach((img, i) => img.pushedRank = i);
  [...images].sort((a, b) => b.lastPulledAt - a.lastPulledAt || byTag(a, b))
    .forEach((img, i) => img.pulledRank = i);

  const protectedDigests = new Map<string, string | null>();
  const protection = async (digest: string) => {
    if (!protectedDigests.has(digest)) {
      protectedDigests.set(digest, await protectionOf(kv, ns, digest));
    }
    return protectedDigests.get(digest)!;
  };
  const untagged = new Set<string>();
  const doomed: ImageFacts[] = [];
  for (const img of images) {
    s.tags++;
    const v = rules.judge(img, now);
    for (const err of v.errors) {
      s.ruleErrors++;
      log.warn("retention rule failed; the tag is kept", {
        rule: `${rules.where}.rules[${err.rule}]`,
        namespace: ns,
        tag: img.tag,
        error: err.error,
      });
    }
    if (v.keep) {
      s.kept++;
      continue;
    }
    const why = manifests.isImmutable(ns, img.tag)
      ? "protected: an immutable tag"
      : await protection(img.digest);
    if (why) {
      s.protected++;
      opts.report?.(`keep ${ns}:${img.tag} (${img.digest}): ${why}`);
      continue;
    }
    opts.report?.(`delete ${ns}:${img.tag} (${img.digest})`);
    s.deleted++;
    if (!opts.dryRun) doomed.push(img);
  }
  // Tag deletes check only their own tag key, so several run at once without conflicting.
  let next = 0;
  await Promise.all(Array.from({ length: DELETE_CONCURRENCY }, async () => {
    for (let i = next++; i < doomed.length; i = next++) {
      const img = doomed[i];
      if (opts.signal?.aborted) return;
      try {
        await manifests.delete(ns, img.tag, null);
        untagged.add(img.digest);
      } catch (e) {
        s.deleted--;
        if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") continue; // gone already
        s.failures++;
        log.error("prune: tag delete failed", { namespace: ns, tag: img.tag, error: String(e) });
      }
    }
  }));
  if (opts.dryRun) {
    // The manifests a real run would delete: every tag of theirs goes.
    const going = new Set(
      images.filter((i) => !isKept(i, rules, now) && !manifests.isImmutable(ns, i.tag))
        .map((i) => i.tag),
    );
    for (const d of new Set(images.map((i) => i.digest))) {
      const tags = images.filter((i) => i.digest === d);
      if (tags.every((t) => going.has(t.tag)) && !(await protection(d))) {
        opts.report?.(`delete ${ns}@${d}`);
        s.manifests++;
      }
    }
    return;
  }
  for (const d of untagged) {
    if (await hasAny(kv, K.tagrevs(ns, d))) continue;
    // Re-checked: a referrer may have arrived since the tags were judged.
    if (await protectionOf(kv, ns, d)) continue;
    try {
      await manifests.delete(ns, d, null);
      opts.report?.(`delete ${ns}@${d}`);
      s.manifests++;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") continue;
      s.failures++;
      log.error("prune: manifest delete failed", { namespace: ns, digest: d, error: String(e) });
    }
  }
}

function isKept(img: ImageFacts, rules: RetentionRules, now: number): boolean {
  return rules.judge(img, now).keep;
}

/** Why `digest` may not be pruned from `ns`, or null. */
async function protectionOf(kv: Deno.Kv, ns: string, digest: string): Promise<string | null> {
  if (await hasAny(kv, K.mrefs(ns, digest))) return "protected: a child of an index";
  if (await hasAny(kv, K.referrers(ns, digest))) return "protected: has referrers";
  return null;
}

export function formatPrune(s: PruneSummary, dryRun: boolean): string {
  const verb = dryRun ? "would delete" : "deleted";
  return `prune: ${s.namespaces} namespace(s), ${s.tags} tag(s); kept ${s.kept}, ${verb} ${s.deleted} tag(s) and ${s.manifests} manifest(s), ${s.protected} protected; ${s.ruleErrors} rule error(s) (kept), ${s.failures} failure(s) in ${
    s.seconds.toFixed(2)
  } s`;
}
