// `verify` (issue 38): re-hashes what the blob store holds against the digests that name it, at
// most `bytes_per_sec`, and quarantines what does not match (quarantine.ts: out of serving,
// unlinked, refetched from an upstream where there is one). Then the manifest bodies kept in KV.
//
// The walk follows KV's key order (blob/ records, or one namespace's link/ records, then rev/),
// so a pass that stops (a restart, Ctrl+C, kill -9) goes on from the cursor it saved. Safe beside
// running servers: a blob is judged against its record as read before its bytes, and quarantined
// only under the reclamation marker after a second hash, so a push or a scrub of the same digest
// meanwhile is never reported as corruption ("raced": judged again next pass).
import {
  holdWhileRunning,
  K,
  type QuarantineRecord,
  type VerifyCursor,
  type VerifyLease,
} from "../kv/mod.ts";
import { VerifyMeta } from "../metadata/mod.ts";
import { countIntegrityFailure, mismatch } from "../storage/mod.ts";
import type { Quarantine, Throttle } from "./quarantine.ts";

export interface VerifyOptions {
  dryRun?: boolean;
  /** only the blobs this namespace links and its manifest bodies */
  namespace?: string | null;
  /** bytes hashed per second at most; null or 0: as fast as the store reads */
  bytesPerSec?: number | null;
  /** stops the pass between two reads (its cursor is saved: the next run goes on from there) */
  signal?: AbortSignal;
  /** a line per finding, as it is made */
  report?: (line: string) => void;
}

/** The counters of a pass (kept in its cursor, so a resumed pass reports the whole pass). */
const COUNTERS = [
  "blobs",
  "bytes",
  "corrupt",
  "quarantined",
  "refetch",
  "pushed",
  "raced",
  "missing",
  "manifests",
  "manifestsCorrupt",
] as const;
type Counter = typeof COUNTERS[number];

export interface VerifySummary extends Record<Counter, number> {
  dryRun: boolean;
  /** "" (every blob) or the namespace */
  scope: string;
  /** where this run began, when it went on from an earlier run's cursor */
  resumedFrom: string | null;
  /** the pass reached its end (false: stopped, to be continued) */
  complete: boolean;
  /** quarantines a process left unfinished that this run finished */
  finished: number;
  /** quarantine records dropped because the digest is stored whole again */
  restored: number;
  /** quarantined digests still not served, with why (at most 100) */
  quarantinedNow: string[];
  /** bytes hashed and seconds spent by this run */
  runBytes: number;
  seconds: number;
}

/** Cursor writes: at most one per this many ms (a pass killed redoes at most that much). */
const SAVE_EVERY_MS = 1000;
/** A blob record younger than this whose bytes are absent is a write in progress, not a loss. */
const MISSING_AFTER_MS = 60_000;
const LISTED_QUARANTINED = 100;

export class Verifier {
  private readonly meta: VerifyMeta;

  /**
   * `holder` names this verifier in the one-pass-at-a-time lease (a serving process passes its
   * own, so that a restarted server takes over its predecessor's lease).
   */
  constructor(
    private readonly kv: Deno.Kv,
    private readonly quarantine: Quarantine,
    private readonly holder: string = `verify ${Deno.hostname()}:${Deno.pid} ${
      crypto.randomUUID().slice(0, 8)
    }`,
  ) {
    this.meta = new VerifyMeta(kv);
  }

  /**
   * Whether a scheduled pass is due: one was interrupted (its cursor waits), or none finished
   * within `everyMs` / 2 (a restart soon after a pass does not start another).
   */
  async due(everyMs: number, scope = ""): Promise<boolean> {
    const c = await this.meta.cursor(scope);
    if (!c || c.phase !== "done") return true;
    return Date.now() - (c.finishedAt ?? 0) >= everyMs / 2;
  }

  /**
   * One pass (or the rest of an interrupted one); `{ held }` while another verify holds the lease.
   * A pass whose lease another took (it stalled for a whole term) stops as a Ctrl+C stops it.
   */
  async run(opts: VerifyOptions = {}): Promise<VerifySummary | { held: VerifyLease }> {
    if (opts.dryRun) return await this.pass(true, opts);
    let got = await this.meta.lease(this.holder);
    if (!got.ok) {
      // Its holder may be gone (a kill -9) with its lease running out within seconds: wait for
      // that once. A live holder renews meanwhile and keeps it.
      await sleep(got.held.until - Date.now() + 100, opts.signal);
      got = await this.meta.lease(this.holder);
    }
    if (!got.ok) return { held: got.held.value };
    return await holdWhileRunning(
      got.lease,
      (signal) => this.pass(false, { ...opts, signal }),
      { signal: opts.signal, name: "verify" },
    );
  }

  private async pass(dryRun: boolean, opts: VerifyOptions): Promise<VerifySummary> {
    const t0 = performance.now();
    const scope = opts.namespace ?? "";
    const report = opts.report ?? (() => {});
    const s: VerifySummary = {
      dryRun,
      scope,
      resumedFrom: null,
      complete: false,
      finished: 0,
      restored: 0,
      quarantinedNow: [],
      runBytes: 0,
      seconds: 0,
      ...Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Record<Counter, number>,
    };
    if (!dryRun) s.finished = await this.finishQuarantines(report);
    const last = dryRun ? null : await this.meta.cursor(scope);
    const saved = last?.phase === "done" ? null : last;
    const cursor: VerifyCursor = saved ?? {
      id: crypto.randomUUID(),
      startedAt: Date.now(),
      phase: "blobs",
      after: null,
      counts: {},
    };
    for (const c of COUNTERS) s[c] = cursor.counts[c] ?? 0;
    if (saved?.after) s.resumedFrom = `${saved.phase} after ${saved.after.slice(1).join("/")}`;
    let lastSave = Date.now();
    const save = async (force = false) => {
      if (dryRun || (!force && Date.now() - lastSave < SAVE_EVERY_MS)) return;
      cursor.counts = Object.fromEntries(COUNTERS.map((c) => [c, s[c]]));
      await this.meta.saveCursor(scope, cursor);
      lastSave = Date.now();
    };
    const throttle = limiter(opts.bytesPerSec ?? null, opts.signal);
    const ns = scope === "" ? null : scope;
    try {
      if (cursor.phase === "blobs") {
        const entries = ns === null
          ? this.meta.blobs(cursor.after)
          : this.meta.links(ns, cursor.after);
        for await (const e of entries) {
          if (opts.signal?.aborted) break;
          const digest = e.key.at(-1) as string;
          const seen = ns === null ? e : await this.quarantine.meta.blobEntry(digest);
          await this.blob(digest, seen, dryRun, throttle, s, report);
          cursor.after = e.key;
          await save();
        }
        if (!opts.signal?.aborted) {
          cursor.phase = "manifests";
          cursor.after = null;
        }
      }
      if (cursor.phase === "manifests" && !opts.signal?.aborted) {
        for await (const e of this.meta.revisions(ns, cursor.after)) {
          if (opts.signal?.aborted) break;
          const [, revNs, digest] = e.key as [string, string, string];
          if (e.value.body !== undefined) {
            await this.inline(revNs, digest, e.value.body, dryRun, throttle, s, report);
          } else if (ns !== null) {
            // In one namespace's pass, its bodies kept in the blob store are not among its links.
            await this.blob(
              digest,
              await this.quarantine.meta.blobEntry(digest),
              dryRun,
              throttle,
              s,
              report,
            );
          }
          cursor.after = e.key;
          await save();
        }
      }
      s.complete = !opts.signal?.aborted;
    } finally {
      if (s.complete) {
        cursor.phase = "done";
        cursor.after = null;
        cursor.finishedAt = Date.now();
      }
      await save(true);
    }
    if (s.complete && !dryRun) s.restored = await this.dropRestored();
    s.quarantinedNow = await this.listQuarantined(ns);
    s.runBytes = throttle.bytes();
    s.seconds = (performance.now() - t0) / 1000;
    return s;
  }

  /** Judges one stored blob (or manifest body kept in the blob store). */
  private async blob(
    digest: string,
    seen: Deno.KvEntryMaybe<unknown>,
    dryRun: boolean,
    throttle: Limiter,
    s: VerifySummary,
    report: (line: string) => void,
  ): Promise<void> {
    const judged = await this.quarantine.hash(digest, throttle.wait);
    if (!judged) {
      if (await this.lost(digest, seen)) {
        s.missing++;
        report(`missing ${digest}: its record says it is stored, the blob store has no bytes`);
      }
      return;
    }
    s.blobs++;
    s.bytes += judged.size;
    if (judged.found === digest) return;
    s.corrupt++;
    if (dryRun) {
      countIntegrityFailure("blob");
      report(`corrupt ${digest} (${judged.size} bytes hash to ${judged.found}): would quarantine`);
      return;
    }
    const out = await this.quarantine.quarantine(digest, { seen, judged, throttle: throttle.wait });
    if (out.result !== "quarantined") {
      // Placed again or reclaimed meanwhile: not corruption after all; judged again next pass.
      s.corrupt--;
      if (out.result === "raced") s.raced++;
      return;
    }
    countIntegrityFailure(out.rec.kind);
    s.quarantined++;
    if (out.rec.refetch.length > 0) s.refetch++;
    else s.pushed++;
    report(
      `corrupt ${digest} (${judged.size} bytes hash to ${out.rec.found}): ${describe(out.rec)}`,
    );
  }

  /** Judges a manifest body kept in KV. */
  private async inline(
    ns: string,
    digest: string,
    body: Uint8Array,
    dryRun: boolean,
    throttle: Limiter,
    s: VerifySummary,
    report: (line: string) => void,
  ): Promise<void> {
    await throttle.wait(body.byteLength);
    s.manifests++;
    const found = mismatch(digest, body);
    if (found === null) return;
    s.manifestsCorrupt++;
    countIntegrityFailure("manifest");
    report(
      `corrupt manifest ${ns}@${digest} kept in KV (${body.byteLength} bytes hash to ${found}): ${
        dryRun ? "would refuse it" : "refused on every read until it is pushed (or fetched) again"
      }`,
    );
    if (!dryRun) await this.quarantine.flagInline(ns, digest, found, body.byteLength);
  }

  /**
   * Whether a record with no bytes is a loss: not a write that reserved and has yet to place
   * its bytes (young or changed record), a reclamation, or a quarantine.
   */
  private async lost(digest: string, seen: Deno.KvEntryMaybe<unknown>): Promise<boolean> {
    const [blob, marker, q] = await this.kv.getMany<[{ at: number }, unknown, QuarantineRecord]>([
      K.blob(digest),
      K.reclaim(digest),
      K.quarantine(digest),
    ]);
    if (!blob.value || blob.versionstamp !== seen.versionstamp) return false;
    if (marker.value || (q.value && q.value.stage !== "claimed")) return false;
    return Date.now() - blob.value.at > MISSING_AFTER_MS;
  }

  /** Quarantines a process left short of settled (it died mid-way). */
  private async finishQuarantines(report: (line: string) => void): Promise<number> {
    let n = 0;
    for await (const { digest, rec } of this.quarantine.meta.records()) {
      if (rec.stage === "settled") continue;
      const out = await this.quarantine.resume(digest, rec);
      n++;
      if (out.result === "quarantined") {
        report(`finished the quarantine of ${digest}: ${describe(out.rec)}`);
      }
    }
    return n;
  }

  /**
   * Drops records of digests stored whole again (a re-push or a refetch placed them: blob/<d>
   * exists, and this pass hashed it); a body kept in KV, once every revision named reads right.
   */
  private async dropRestored(): Promise<number> {
    let n = 0;
    for await (const { digest, rec } of this.quarantine.meta.records()) {
      if (rec.stage !== "settled") continue;
      if (rec.inline) {
        const revs = await this.kv.getMany<{ body?: Uint8Array }[]>(
          rec.namespaces.slice(0, 10).map((ns) => K.rev(ns, digest)),
        );
        if (revs.some((r) => r.value?.body && mismatch(digest, r.value.body) !== null)) continue;
      } else if (!(await this.quarantine.meta.blobEntry(digest)).value) continue;
      await this.quarantine.meta.drop(digest);
      n++;
    }
    return n;
  }

  private async listQuarantined(ns: string | null): Promise<string[]> {
    const out: string[] = [];
    for await (const { digest, rec } of this.quarantine.meta.records()) {
      if (rec.stage === "claimed") continue;
      if (ns !== null && !rec.namespaces.includes(ns)) continue;
      const what = rec.kind === "manifest" ? "manifest body" : "blob";
      out.push(
        `${what} ${digest} since ${
          new Date(rec.at).toISOString()
        }, ${rec.size} bytes hashing to ${rec.found}; ${
          describe(rec).replace(/^[^;]*(; |$)/, "") || "nothing held it"
        }`,
      );
      if (out.length >= LISTED_QUARANTINED) break;
    }
    return out;
  }
}

/** What quarantine did and what the namespaces concerned should expect. */
function describe(rec: QuarantineRecord): string {
  const pushed = rec.namespaces.filter((n) => !rec.refetch.includes(n));
  const parts = [
    rec.inline ? "refused on every read" : `quarantined${rec.kept ? " (bytes kept aside)" : ""}`,
  ];
  if (rec.refetch.length > 0) {
    parts.push(`fetched again from the upstream of ${rec.refetch.join(", ")}`);
  }
  if (pushed.length > 0) {
    parts.push(
      `no source for ${pushed.join(", ")}${
        rec.more > 0 ? ` and ${rec.more} more` : ""
      }: push it again`,
    );
  }
  if (rec.namespaces.length === 0) parts.push("no namespace held it");
  return parts.join("; ");
}

interface Limiter {
  wait: Throttle;
  bytes(): number;
}

/** At most `bytesPerSec` on average since the first byte; none when null or 0. */
function limiter(bytesPerSec: number | null, signal?: AbortSignal): Limiter {
  let total = 0;
  const t0 = performance.now();
  return {
    bytes: () => total,
    wait: async (n) => {
      total += n;
      if (!bytesPerSec) return;
      const due = t0 + (total / bytesPerSec) * 1000;
      const ms = due - performance.now();
      if (ms > 0) await sleep(ms, signal);
    },
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

export function formatVerify(s: VerifySummary): string {
  const rate = s.seconds > 0 ? (s.runBytes / s.seconds / 1e6).toFixed(2) : "0.00";
  const scope = s.scope ? ` of ${s.scope}` : "";
  const found = s.dryRun
    ? `${s.corrupt} corrupt (would be quarantined)`
    : `${s.corrupt} corrupt: ${s.quarantined} quarantined (${s.refetch} fetched again from an upstream, ${s.pushed} to push again)`;
  return `verify${
    s.dryRun ? " (dry run)" : ""
  }${scope}: ${s.blobs} blob(s) checked (${s.bytes} bytes), ${found}, ${s.raced} raced, ${s.missing} missing; ${s.manifests} manifest body(ies) in KV checked, ${s.manifestsCorrupt} corrupt; ${s.finished} unfinished quarantine(s) finished, ${s.restored} restored; ${s.quarantinedNow.length} quarantined now; ${
    s.complete ? "pass complete" : "stopped: the next run goes on from here"
  }${s.resumedFrom ? ` (resumed: ${s.resumedFrom})` : ""}; ${s.seconds.toFixed(2)}s (${rate} MB/s)`;
}
