// The audit trail: records under audit/<time key> (lib/kv/keys.ts), newest listed first.
// A write's record is planned into the write's own commit (`plan`, through lib/events' planning
// step), so an acknowledged write always has its record; acts whose writes are not built here
// (job admin, runs, reloads, tokens) get a commit of their own right after (`record`). Denials
// pass a per-process token bucket first: a flood of refused requests stores at most
// max_denials_per_minute records a minute per process and counts the rest in the next one.
import type { Config } from "../config/mod.ts";
import { isStorageKey, storageKey } from "../jobs/mod.ts";
import { K, type PlannedMutation } from "../kv/mod.ts";
import { log } from "../log.ts";
import { currentAuditContext, withAuditContext } from "./context.ts";
import { type AuditFields, type AuditRecord, buildRecord } from "./record.ts";

export interface AuditQuery {
  identity: string | null;
  /** records whose namespace starts with this */
  namespacePrefix: string | null;
  action: string | null;
  /** ms, inclusive */
  since: number | null;
  /** ms, inclusive */
  until: number | null;
  n: number;
  /** a record id: the page continues with the records older than it */
  next: string | null;
}

export interface AuditPage {
  records: AuditRecord[];
  next?: string;
}

/** Records one listing page reads at most, matching or not: a page's cost is bounded. */
export const AUDIT_SCAN_MAX = 5000;
/** Deletes per retention commit (each a small key: far below a commit's limits). */
const SWEEP_BATCH = 500;
const DAY_MS = 86_400_000;

export const isAuditId = isStorageKey;

export class AuditTrail {
  /**
   * Mutations committed with every record, and the step after that commit (set by lib/events:
   * the deliveries of webhooks that want `audit.record`).
   */
  carriedBy: (r: AuditRecord) => PlannedMutation[] = () => [];
  carried: (planned: PlannedMutation[]) => void = () => {};
  private tokens = -1;
  private refilledAt = 0;
  private suppressed = 0;

  constructor(
    private readonly kv: Deno.Kv,
    private readonly cfg: Config,
    private readonly now: () => number = Date.now,
  ) {}

  /** Read on each call: a config reload turns the trail on or off. */
  get enabled(): boolean {
    return this.cfg.global.audit.enabled;
  }

  /** The record of an act as a mutation of the act's own commit ([] when the trail is off). */
  plan(f: AuditFields): PlannedMutation[] {
    if (!this.enabled) return [];
    const { key, value } = this.entry(f);
    return [{ kind: "set", key, value }];
  }

  /**
   * The record in a commit of its own, for an act whose writes are not built with it. A failure
   * is logged, never thrown: the act has happened.
   */
  async record(f: AuditFields): Promise<void> {
    if (!this.enabled) return;
    await this.write(this.entry(f));
  }

  /** A refused request, within the denial rate bound. */
  async denied(f: AuditFields): Promise<void> {
    if (!this.enabled) return;
    if (!this.takeToken()) {
      this.suppressed++;
      return;
    }
    const { key, value } = this.entry({ ...f, outcome: "denied" });
    if (this.suppressed > 0) value.suppressed = this.suppressed;
    this.suppressed = 0;
    await this.write({ key, value });
  }

  private async write({ key, value }: { key: Deno.KvKey; value: AuditRecord }): Promise<void> {
    try {
      const carried = this.carriedBy(value);
      const op = this.kv.atomic().set(key, value);
      for (const m of carried) m.kind === "set" ? op.set(m.key, m.value) : op.delete(m.key);
      await op.commit();
      this.carried(carried);
    } catch (e) {
      log.error("audit record not written", { action: value.action, error: String(e) });
    }
  }

  async list(q: AuditQuery): Promise<AuditPage> {
    const start = K.audit(storageKey(q.since ?? 0, ""));
    let end = K.audit(storageKey((q.until ?? 8.64e15) + 1, ""));
    if (q.next !== null && q.next < (end[1] as string)) end = K.audit(q.next);
    const records: AuditRecord[] = [];
    let last: string | null = null;
    let scanned = 0;
    const it = this.kv.list<AuditRecord>({ start, end }, {
      reverse: true,
      limit: AUDIT_SCAN_MAX,
      batchSize: 500,
    });
    for await (const e of it) {
      scanned++;
      last = e.key[1] as string;
      if (!matches(e.value, q)) continue;
      records.push({ ...e.value, id: last });
      if (records.length >= q.n) return { records, next: last };
    }
    // The scan bound was reached before a full page: the client continues from where it stopped.
    return scanned >= AUDIT_SCAN_MAX && last !== null ? { records, next: last } : { records };
  }

  /** Retention (`max_age_days`), run by scrub: drops the records older than the bound. */
  async sweep(dryRun: boolean): Promise<{ dropped: number; scanned: number }> {
    const out = { dropped: 0, scanned: 0 };
    const days = this.cfg.global.audit.maxAgeDays;
    if (days === null) return out;
    const end = K.audit(storageKey(this.now() - days * DAY_MS, ""));
    while (true) {
      const batch: Deno.KvKey[] = [];
      for await (const e of this.kv.list({ prefix: K.auditAll(), end }, { limit: SWEEP_BATCH })) {
        batch.push(e.key);
      }
      out.scanned += batch.length;
      if (batch.length === 0) break;
      out.dropped += batch.length;
      if (dryRun) break;
      const op = this.kv.atomic();
      for (const k of batch) op.delete(k);
      await op.commit();
      if (batch.length < SWEEP_BATCH) break;
    }
    return out;
  }

  private entry(f: AuditFields): { key: Deno.KvKey; value: AuditRecord } {
    const at = f.at ?? this.now();
    const id = storageKey(at, crypto.randomUUID());
    const ctx = currentAuditContext();
    const value = buildRecord(id, at, { request_id: ctx?.requestId ?? null, ...f });
    return { key: K.audit(id), value };
  }

  private takeToken(): boolean {
    const max = this.cfg.global.audit.maxDenialsPerMinute;
    const now = this.now();
    if (this.tokens < 0) this.tokens = max;
    else this.tokens = Math.min(max, this.tokens + (now - this.refilledAt) * max / 60_000);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

function matches(r: AuditRecord, q: AuditQuery): boolean {
  if (q.action !== null && r.action !== q.action) return false;
  if (q.identity !== null && r.identity !== q.identity) return false;
  if (q.namespacePrefix !== null && !(r.namespace ?? "").startsWith(q.namespacePrefix)) {
    return false;
  }
  return true;
}

/**
 * Runs a server-side act (a prune run) under one request id, which the records of the writes it
 * makes carry too, then records the run itself: `ok` with `describe`'s summary, or `failed`.
 */
export async function auditedRun<T>(
  trail: AuditTrail,
  action: string,
  run: () => Promise<T>,
  describe: (r: T) => string,
): Promise<T> {
  const ctx = { requestId: trail.enabled ? crypto.randomUUID() : null, action };
  return await withAuditContext(ctx, async () => {
    let r: T;
    try {
      r = await run();
    } catch (e) {
      await trail.record({ action, outcome: "failed", detail: String(e) });
      throw e;
    }
    await trail.record({ action, detail: describe(r) });
    return r;
  });
}
