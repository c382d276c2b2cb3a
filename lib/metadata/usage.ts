// Storage usage per repository, kept exact by the commits that change what a repository holds.
//
// A repository's usage is the bytes of the distinct digests its namespaces link (blobs) or hold
// revisions of (manifests): a layer linked by ten namespaces of one repository counts once.
// `qref/<repository>/<digest>` counts the members (links + revisions) of each digest; a commit
// adding the first member adds the digest's size to `usage/<repository>`, one removing the last
// subtracts it. Each plan below goes into the writer's own commit and checks the qref entry it
// read, so two writers never both see the same transition. Every plan also writes the usage key
// (a sum of 0 when the total does not move), so scrub's recount, which checks that key, sees any
// member change made while it counted.
//
// Under a quota the growing commit checks the usage entry it compared against the limit and sets
// the new total: accounted usage never passes the limit, whatever races it.
import { RegistryError } from "../oci/errors.ts";
import { K } from "./keys.ts";
import { getAll } from "./kv_util.ts";
import type { CommitBudget } from "./kv_limits.ts";

/** Where a namespace's bytes count, and the limit there. */
export interface QuotaPolicy {
  /** the repository whose usage a namespace's links and revisions count toward */
  repositoryOf(ns: string): string;
  /** that repository's limit in bytes; null = none */
  maxBytes(repository: string): number | null;
}

const WRAP = 1n << 64n;
const HALF = 1n << 63n;

/** A KvU64 total as a number; a wrapped-around (negative) total reads as 0 until scrub fixes it. */
export function usageValue(e: Deno.KvEntryMaybe<unknown>): number {
  const v = e.value instanceof Deno.KvU64 ? e.value.value : 0n;
  return v >= HALF ? 0 : Number(v);
}

const wrapped = (n: number | bigint) => ((BigInt(n) % WRAP) + WRAP) % WRAP;
const u64 = (n: number | bigint) => new Deno.KvU64(wrapped(n));

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** 10.0 GiB, 420 MiB, 512 B: what a person reads in a quota message. */
export function formatBytes(n: number): string {
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${UNITS[i]}`;
}

export function quotaExceeded(repository: string, used: number, max: number, adds: number) {
  return new RegistryError(
    "DENIED",
    `quota exceeded: ${repository} uses ${formatBytes(used)} of ${formatBytes(max)}; ` +
      `this push needs ${formatBytes(adds)} more`,
    { status: 403 },
  );
}

/** What one commit must add for a usage change: checks and mutations, planned from reads. */
export interface UsagePlan {
  /** counts the plan in a commit's budget; false (maybe partly counted) when it does not fit */
  fits(budget: CommitBudget): boolean;
  apply(op: Deno.AtomicOperation): void;
}

const ZERO = new Deno.KvU64(0n);

export class UsageLedger {
  constructor(private readonly kv: Deno.Kv, readonly policy: QuotaPolicy) {}

  /**
   * For a commit making `digest` a member of `ns` (a link or a revision) that was not one when
   * the caller read it; the caller's commit checks that read. Throws 403 DENIED when the digest
   * is new to the repository and would take it past its quota.
   */
  async planAdd(ns: string, digest: string, size: number): Promise<UsagePlan> {
    const repo = this.policy.repositoryOf(ns);
    const [qref, usage] = await getAll(this.kv, [K.qref(repo, digest), K.usage(repo)]);
    const count = usageValue(qref);
    const max = count === 0 ? this.policy.maxBytes(repo) : null;
    const used = usageValue(usage);
    if (max !== null && used + size > max) throw quotaExceeded(repo, used, max, size);
    return {
      fits: (b) =>
        b.check(K.qref(repo, digest)) && b.set(K.qref(repo, digest), ZERO) &&
        (max === null || b.check(K.usage(repo))) && b.set(K.usage(repo), ZERO),
      apply: (op) => {
        op.check(qref).set(K.qref(repo, digest), u64(count + 1));
        if (max !== null) op.check(usage).set(K.usage(repo), u64(used + size));
        else op.sum(K.usage(repo), wrapped(count === 0 ? size : 0));
      },
    };
  }

  /** For a commit removing a member of `ns` that the caller read and checks. */
  async planRemove(ns: string, digest: string, size: number): Promise<UsagePlan> {
    const repo = this.policy.repositoryOf(ns);
    const qref = await this.kv.get(K.qref(repo, digest));
    const count = usageValue(qref);
    return {
      fits: (b) =>
        b.check(K.qref(repo, digest)) && b.set(K.qref(repo, digest), ZERO) &&
        b.set(K.usage(repo), ZERO),
      apply: (op) => {
        op.check(qref);
        if (count > 1) op.set(K.qref(repo, digest), u64(count - 1));
        else op.delete(K.qref(repo, digest));
        // count 0: a member from before usage was kept; it was never added, so nothing goes.
        op.sum(K.usage(repo), wrapped(count === 1 ? -size : 0));
      },
    };
  }

  /** Bytes a repository uses now. */
  async used(repository: string): Promise<number> {
    return usageValue(await this.kv.get(K.usage(repository)));
  }
}

/** What a recount found for one repository. */
export interface Recount {
  repository: string;
  stored: number;
  actual: number;
  /** qref entries that were (or would be) rewritten or dropped */
  refsFixed: number;
  /** false when writers kept changing the repository during every attempt */
  settled: boolean;
}

const RECOUNT_ATTEMPTS = 3;
const FIX_BATCH = 400;

/** Scrub's side: recounts repositories from their link and revision keys and repairs drift. */
export class UsageMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /** Every namespace holding a link or a revision, and every repository with a usage key. */
  async inventory(): Promise<{ namespaces: Set<string>; repositories: Set<string> }> {
    const namespaces = new Set<string>();
    const repositories = new Set<string>();
    for (const prefix of [K.linksAll(), K.revsAll()]) {
      // Skips to the next namespace after each hit: one read per namespace, not per key.
      let start: Deno.KvKey | null = null;
      for (;;) {
        const sel: Deno.KvListSelector = start ? { prefix, start } : { prefix };
        let found: string | null = null;
        for await (const e of this.kv.list(sel, { limit: 1 })) found = e.key[1] as string;
        if (found === null) break;
        namespaces.add(found);
        start = [...prefix, found, "\uffff\uffff"];
      }
    }
    for await (const e of this.kv.list({ prefix: K.usageAll() })) {
      repositories.add(e.key[1] as string);
    }
    return { namespaces, repositories };
  }

  /**
   * Recounts `repository` from its namespaces' links and revisions and, unless `dryRun`, sets
   * its usage and qref entries to match, checking the usage entry read before the count (every
   * member change writes it, so a change made while counting fails the repair, which recounts).
   */
  async recount(repository: string, namespaces: string[], dryRun: boolean): Promise<Recount> {
    let last: Recount = { repository, stored: 0, actual: 0, refsFixed: 0, settled: false };
    for (let attempt = 0; attempt < RECOUNT_ATTEMPTS; attempt++) {
      const usage = await this.kv.get(K.usage(repository));
      const sizes = new Map<string, { size: number; n: number }>();
      for (const ns of namespaces) {
        for (const prefix of [K.linksAll(), K.revsAll()]) {
          const it = this.kv.list<{ size: number }>({ prefix: [...prefix, ns] }, {
            batchSize: 1000,
          });
          for await (const e of it) {
            const d = e.key[2] as string;
            const s = sizes.get(d);
            if (s) s.n++;
            else sizes.set(d, { size: e.value.size, n: 1 });
          }
        }
      }
      let actual = 0;
      for (const s of sizes.values()) actual += s.size;
      const fixes: [Deno.KvKey, Deno.KvU64 | null][] = [];
      for await (const e of this.kv.list({ prefix: K.qrefsOf(repository) }, { batchSize: 1000 })) {
        const d = e.key[2] as string;
        const want = sizes.get(d)?.n ?? 0;
        if (usageValue(e) !== want) fixes.push([e.key, want ? u64(want) : null]);
        sizes.delete(d);
      }
      for (const [d, s] of sizes) fixes.push([K.qref(repository, d), u64(s.n)]);
      last = {
        repository,
        stored: usageValue(usage),
        actual,
        refsFixed: fixes.length,
        settled: true,
      };
      if (dryRun || (last.stored === actual && fixes.length === 0)) return last;
      if (await this.repair(usage, actual, fixes)) return last;
      last.settled = false;
    }
    return last;
  }

  /** The usage total goes last, with the last batch of qref fixes, each batch checking it. */
  private async repair(
    usage: Deno.KvEntryMaybe<unknown>,
    actual: number,
    fixes: [Deno.KvKey, Deno.KvU64 | null][],
  ): Promise<boolean> {
    let guard = usage.versionstamp;
    for (let i = 0; i === 0 || i < fixes.length; i += FIX_BATCH) {
      const op = this.kv.atomic().check({ key: usage.key, versionstamp: guard });
      for (const [key, v] of fixes.slice(i, i + FIX_BATCH)) {
        if (v) op.set(key, v);
        else op.delete(key);
      }
      // Rewritten in each batch: the next batch's check then fails if a writer came between.
      if (i + FIX_BATCH >= fixes.length) {
        if (actual > 0) op.set(usage.key, u64(actual));
        else op.delete(usage.key);
      } else op.sum(usage.key, 0n);
      const r = await op.commit();
      if (!r.ok) return false;
      guard = r.versionstamp;
    }
    return true;
  }
}
