// Storage usage per repository, kept exact by the commits that change what a repository holds.
//
// A repository's usage is the bytes of the distinct digests its namespaces link (blobs) or hold
// revisions of (manifests): a layer linked by ten namespaces of one repository counts once.
// `qref/<repository>/<digest>` counts the members (links + revisions) of each digest; a commit
// adding the first member adds the digest's size to `usage/<repository>`, one removing the last
// subtracts it. Each plan below goes into the writer's own commit and checks the qref entry it
// read, so two writers never both see the same transition. Other member changes touch only the
// qref entry, so pushes of shared layers do not contend on the repository's total.
//
// Under a quota a growing commit either checks the usage entry it compared against the limit and
// sets the new total, or, admitted with room to spare in this process (`admit`), adds to it
// blindly: blind sums never conflict. A blind commit instead checks `qwriter/<repository>`, the
// process that made the last checked commit there: every checked commit of another process
// rewrites it (when it named someone else), so a blind commit lands only if no other process
// committed growth since it read the total, and this process's own writes in between are
// covered by its reservations. So the quota holds across processes sharing a KV as well; two
// processes pushing into one repository at once take the key over in turn (conflicts, retried).
import { deniedWithReason } from "../oci/mod.ts";
import { type CommitBudget, commitWithRetry, getAll, K } from "../kv/mod.ts";

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
  const text = `quota exceeded: ${repository} uses ${formatBytes(used)} of ${formatBytes(max)}; ` +
    `this push needs ${formatBytes(adds)} more`;
  return deniedWithReason(text);
}

/** What one commit must add for a usage change: checks and mutations, planned from reads. */
export interface UsagePlan {
  /** counts the plan in a commit's budget; false (maybe partly counted) when it does not fit */
  fits(budget: CommitBudget): boolean;
  apply(op: Deno.AtomicOperation): void;
  /**
   * After the commit lost a race: a random pause (longer each attempt, up to 100 ms) when the
   * plan checked the repository's total, which every new digest pushed there rewrites; retried
   * at once, a hundred concurrent pushes under one quota ran out of attempts.
   */
  pause(attempt: number): Promise<void>;
}

const noPause = () => Promise.resolve();

function jitter(attempt: number): Promise<void> {
  const cap = Math.min(100, 2 ** attempt);
  return new Promise((r) => setTimeout(r, Math.random() * cap));
}

const ZERO = new Deno.KvU64(0n);

/** A write admitted by `UsageLedger.admit`, seen by the plans made while it runs. */
interface Admission {
  repo: string;
  size: number;
  /** bytes this process had reserved in the repository when it was admitted */
  before: number;
  /** the writes admitted before it that are still running */
  earlier: Promise<unknown>[];
}

export class UsageLedger {
  /** bytes of admitted writes in flight in this process, per repository */
  private readonly pending = new Map<string, number>();
  /** admitted writes in flight, per repository */
  private readonly running = new Map<string, Set<Promise<unknown>>>();
  /** admitted writes in flight by `ns\0digest` */
  private readonly admitted = new Map<string, Admission[]>();
  /** the last total read per repository (a hint only: see `admit`) */
  private readonly seen = new Map<string, number>();

  /** names this process in `qwriter/<repository>` */
  private readonly id = crypto.randomUUID();

  constructor(private readonly kv: Deno.Kv, readonly policy: QuotaPolicy) {}

  /**
   * Runs `write`, which may add up to `size` new bytes to `ns`'s repository, with those bytes
   * reserved in this process until it returns. A plan made inside it reads the total after the
   * reservation, so the total plus what was reserved before covers every write of this process
   * that could land meanwhile: when the bytes fit that sum the commit adds to the total blindly
   * instead of checking it (concurrent pushes then do not conflict on it). Otherwise the plan
   * first waits for the writes admitted before it, then checks the total it compares; a write
   * admitted after it counted its reservation. So one process never takes the accounted total
   * past the quota. `write` is told whether its bytes surely fit by the last total seen here
   * (`likely`), so it may skip an early check of its own.
   */
  /** Whether `ns`'s repository has a quota (without one, nothing is refused, so nothing read). */
  limited(ns: string): boolean {
    return this.policy.maxBytes(this.policy.repositoryOf(ns)) !== null;
  }

  async admit<T>(
    ns: string,
    digest: string,
    size: number,
    write: (likely: boolean) => Promise<T>,
  ): Promise<T> {
    const repo = this.policy.repositoryOf(ns);
    const max = this.policy.maxBytes(repo);
    if (max === null) return await write(true);
    const before = this.pending.get(repo) ?? 0;
    this.pending.set(repo, before + size);
    const running = this.running.get(repo) ?? new Set<Promise<unknown>>();
    this.running.set(repo, running);
    const seen = this.seen.get(repo);
    const likely = seen !== undefined && seen + before + size <= max;
    const admission: Admission = { repo, size, before, earlier: [...running] };
    // Found by the plans of this write by its namespace and digest (several writes of one blob
    // to one namespace are alike: any of them serves).
    const key = `${ns}\0${digest}`;
    const same = this.admitted.get(key) ?? [];
    same.push(admission);
    this.admitted.set(key, same);
    const p = write(likely);
    running.add(p);
    try {
      return await p;
    } finally {
      same.splice(same.indexOf(admission), 1);
      if (same.length === 0 && this.admitted.get(key) === same) this.admitted.delete(key);
      running.delete(p);
      if (running.size === 0 && this.running.get(repo) === running) this.running.delete(repo);
      const left = (this.pending.get(repo) ?? size) - size;
      if (left > 0) this.pending.set(repo, left);
      else this.pending.delete(repo);
    }
  }

  /**
   * For a commit making `digest` a member of `ns` (a link or a revision) that was not one when
   * the caller read it; the caller's commit checks that read. Throws 403 DENIED when the digest
   * is new to the repository and would take it past its quota.
   */
  async planAdd(
    ns: string,
    digest: string,
    size: number,
    /** the entries of `keysFor(ns, digest)`, when the caller read them with its own keys (used
     * only without a quota) */
    read?: Deno.KvEntryMaybe<unknown>[],
  ): Promise<UsagePlan> {
    const repo = this.policy.repositoryOf(ns);
    const a = this.admitted.get(`${ns}\0${digest}`)?.[0];
    const mine = a && a.repo === repo && size <= a.size ? a : null;
    const keys = this.keysFor(ns, digest);
    // Entries read by the caller serve only a repository without a quota: their commit checks
    // qref, the one thing they decide. Under a quota, usage must be read after this write's
    // admission (`admit`), or writes that landed since an early read would be counted neither in
    // `used` nor in `before`, and a blind commit could pass the limit.
    let [qref, usage, writer] = read && !this.limited(ns) ? read : await getAll(this.kv, keys);
    let count = usageValue(qref);
    const max = count === 0 ? this.policy.maxBytes(repo) : null;
    let used = usageValue(usage);
    this.seen.set(repo, used);
    // Blind only while this process is the repository's last quota writer (see `qwriter`).
    const owner = writer.value === this.id;
    let blind = false;
    if (max !== null && mine) {
      // Roomy: fits beside every write this process admitted before (all in `before`).
      const roomy = used + mine.before + size <= max;
      if (roomy) blind = owner;
      else if (mine.earlier.length > 0) {
        // Near the limit: let the writes admitted before this one land, then compare afresh.
        await Promise.allSettled(mine.earlier);
        mine.earlier = [];
        [qref, usage, writer] = await getAll(this.kv, keys);
        count = usageValue(qref);
        used = usageValue(usage);
      }
    }
    const grows = max !== null && count === 0;
    const checked = grows && !blind;
    if (checked && used + size > max!) throw quotaExceeded(repo, used, max!, size);
    return {
      fits: (b) =>
        b.check(K.qref(repo, digest)) && b.set(K.qref(repo, digest), ZERO) &&
        (!grows || (b.check(K.usage(repo)) && b.set(K.qwriter(repo), this.id))) &&
        b.set(K.usage(repo), ZERO),
      apply: (op) => {
        op.check(qref).set(K.qref(repo, digest), u64(count + 1));
        if (count > 0) return;
        if (blind) op.check(writer).sum(K.usage(repo), wrapped(size));
        else if (checked) {
          op.check(usage).set(K.usage(repo), u64(used + size));
          // Any other process's blind commits in flight fail on this and re-plan.
          if (writer.value !== this.id) op.set(K.qwriter(repo), this.id);
        } else op.sum(K.usage(repo), wrapped(size));
      },
      pause: grows ? jitter : noPause,
    };
  }

  /**
   * What planAdd reads: a caller reading other keys first may read these in the same getMany
   * and hand the entries over: one KV round trip instead of two.
   */
  keysFor(ns: string, digest: string): Deno.KvKey[] {
    const repo = this.policy.repositoryOf(ns);
    return [K.qref(repo, digest), K.usage(repo), K.qwriter(repo)];
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
        if (count === 1) op.sum(K.usage(repo), wrapped(-size));
      },
      pause: noPause,
    };
  }

  /** Bytes a repository uses now. */
  async used(repository: string): Promise<number> {
    return usageValue(await this.kv.get(K.usage(repository)));
  }

  /** Every repository's usage, at most `limit` of them (one bounded listing). */
  async all(limit = 10_000): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for await (const e of this.kv.list({ prefix: K.usageAll() }, { limit, batchSize: 1000 })) {
      out.set(e.key[1] as string, usageValue(e));
    }
    return out;
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
/** qref entries one repair commit fixes: each is checked, beside the total (10 checks). */
const FIX_BATCH = 9;

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
   * its usage and qref entries to match. The total and the qref entries are read before the
   * members are listed, and every repair checks what it read: a writer that moved the total (a
   * digest's first or last member) or a qref being repaired fails the repair, which recounts.
   */
  async recount(repository: string, namespaces: string[], dryRun: boolean): Promise<Recount> {
    let last: Recount = { repository, stored: 0, actual: 0, refsFixed: 0, settled: false };
    return await commitWithRetry<Recount>("usage.recount", async () => {
      const usage = await this.kv.get(K.usage(repository));
      const qrefs = new Map<string, Deno.KvEntryMaybe<unknown>>();
      for await (const e of this.kv.list({ prefix: K.qrefsOf(repository) }, { batchSize: 1000 })) {
        qrefs.set(e.key[2] as string, e);
      }
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
      const fixes: Fix[] = [];
      for (const [d, e] of qrefs) {
        const want = sizes.get(d)?.n ?? 0;
        if (usageValue(e) !== want) fixes.push({ seen: e, to: want ? u64(want) : null });
      }
      for (const [d, s] of sizes) {
        if (qrefs.has(d)) continue;
        fixes.push({
          seen: { key: K.qref(repository, d), value: null, versionstamp: null },
          to: u64(s.n),
        });
      }
      last = {
        repository,
        stored: usageValue(usage),
        actual,
        refsFixed: fixes.length,
        settled: true,
      };
      if (dryRun || (last.stored === actual && fixes.length === 0)) return { done: last };
      return { op: (await this.repair(usage, actual, fixes)).last, value: last };
    }, { attempts: RECOUNT_ATTEMPTS, otherwise: () => ({ ...last, settled: false }) });
  }

  /**
   * The qref fixes in commits of FIX_BATCH, each checking the entries it rewrites and the total
   * (rewritten in each, so the next commit's check fails if a writer came between); the total
   * is set with the last. Commits all but the last and returns it, for the recount's retry loop
   * to commit; when an earlier one lost its check, returns one that cannot commit, so the loop
   * counts the conflict and recounts.
   */
  private async repair(
    usage: Deno.KvEntryMaybe<unknown>,
    actual: number,
    fixes: Fix[],
  ): Promise<{ last: Deno.AtomicOperation }> {
    let guard = usage.versionstamp;
    for (let i = 0;; i += FIX_BATCH) {
      const op = this.kv.atomic().check({ key: usage.key, versionstamp: guard });
      for (const f of fixes.slice(i, i + FIX_BATCH)) {
        op.check(f.seen);
        if (f.to) op.set(f.seen.key, f.to);
        else op.delete(f.seen.key);
      }
      if (i + FIX_BATCH >= fixes.length) {
        if (actual > 0) op.set(usage.key, u64(actual));
        else op.delete(usage.key);
        // Wrapped: an operation has a `then` that refuses to be awaited.
        return { last: op };
      }
      op.sum(usage.key, 0n);
      const r = await op.commit();
      if (!r.ok) {
        return { last: this.kv.atomic().check({ key: usage.key, versionstamp: NEVER_GIVEN }) };
      }
      guard = r.versionstamp;
    }
  }
}

/** The highest versionstamp, which no commit is given: a check against it always fails. */
const NEVER_GIVEN = "ffffffffffffffffffff";

interface Fix {
  seen: Deno.KvEntryMaybe<unknown>;
  to: Deno.KvU64 | null;
}
