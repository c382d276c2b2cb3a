// Event webhooks (issue 14). A write that causes an event plans its async deliveries into the
// write's own commit (through its write effects, write_effects.ts): one outbox entry per webhook
// (outbox.ts), drained in batches, with retries, backoff and dead letters in the `events` job
// queue. A pull writes nothing of its own (its history is best effort, batched apart), so its
// event is the one commit it causes (emit). When more webhooks want an event than fit a commit
// comfortably, one fan-out job on the `events` queue carries it and writes the entries when it runs, so a commit never grows with the
// number of webhooks. `required` webhooks are called before the operation (require) and a
// failure fails it.
import { type Config, type EventKind, type EventWebhookConfig } from "../config/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import type { JobContext, JobQueues } from "../jobs/mod.ts";
import { PermanentJobError } from "../jobs/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import { RegistryError, unavailable } from "../oci/mod.ts";
import { log } from "../log.ts";
import {
  type AuditFields,
  type AuditRecord,
  AuditTrail,
  currentAuditContext,
} from "../audit/mod.ts";
import { currentActor } from "./actor.ts";
import { deliver, DeliveryError } from "./deliver.ts";
import type { Corruption, EventFields, WharfEvent } from "./event.ts";
import { DELIVER_KIND, outboxEntry, planEntry } from "./outbox.ts";

export const FANOUT_KIND = "fanout-event";
/** Outbox entries per commit when a fan-out job writes them. */
const FANOUT_CHUNK = 200;
/** Up to this many deliveries are planned in the causing commit; more go through a fan-out. */
export const DIRECT_DELIVERIES_MAX = 4;

interface DeliverPayload {
  webhook: string;
  event: WharfEvent;
}

export class Events {
  /** set by the process that drains the outbox: entries were just written here */
  wakeOutbox: () => void = () => {};
  /** The audit trail: the writes that plan events plan their audit record with them. */
  readonly audit: AuditTrail;

  constructor(
    private readonly cfg: Config,
    private readonly jobs: JobQueues,
    private readonly kv: Deno.Kv,
    private readonly now: () => number = Date.now,
  ) {
    this.audit = new AuditTrail(kv, cfg, now);
    this.audit.carriedBy = (r) => this.plan(this.recordEvent(r));
    this.audit.carried = (planned) => this.committed(planned);
  }

  /** Webhooks of `policy` that want `kind` events of `ns`, as configured now. */
  webhooks(kind: EventKind, ns: string, policy: "async" | "required"): EventWebhookConfig[] {
    return this.cfg.eventWebhooks.filter((w) =>
      w.policy === policy &&
      (w.events.length === 0 ? kind !== "audit.record" : w.events.includes(kind)) &&
      (w.repositoryFilter.length === 0 || w.repositoryFilter.some((re) => re.test(ns)))
    );
  }

  /** Whether any webhook wants `kind` events of `ns` (callers skip building events otherwise). */
  wanted(kind: EventKind, ns: string): boolean {
    if (this.audit.enabled && AUDITED.has(kind)) return true;
    return this.cfg.eventWebhooks.length > 0 &&
      (this.webhooks(kind, ns, "async").length > 0 ||
        this.webhooks(kind, ns, "required").length > 0);
  }

  event(kind: EventKind, f: EventFields): WharfEvent {
    const ev: WharfEvent = {
      id: crypto.randomUUID(),
      timestamp: new Date(this.now()).toISOString(),
      kind,
      namespace: f.namespace,
      repository: repositoryOf(this.cfg, f.namespace).name,
      digest: f.digest ?? null,
      reference: f.reference ?? null,
      tag: f.tag ?? null,
      actor: currentActor(),
    };
    if (f.severity_counts) ev.severity_counts = f.severity_counts;
    if (f.vulnerabilities_checked === false) {
      ev.vulnerabilities_checked = false;
      ev.not_checked = f.not_checked;
    }
    return ev;
  }

  /** The async deliveries of `ev` as mutations for the causing write's commit. */
  plan(ev: WharfEvent): PlannedMutation[] {
    const audit = AUDITED.has(ev.kind) ? this.audit.plan(auditFields(ev)) : [];
    // The record's own deliveries ride in the same commit.
    for (const m of [...audit]) {
      if (m.kind === "set") audit.push(...this.plan(this.recordEvent(m.value as AuditRecord)));
    }
    const hooks = this.webhooks(ev.kind, ev.namespace, "async");
    if (hooks.length === 0) return audit;
    if (hooks.length > DIRECT_DELIVERIES_MAX) {
      return [...this.jobs.queue("events").plan(fanoutJob(ev)), ...audit];
    }
    const now = this.now();
    return [...hooks.map((h) => planEntry(h, ev, now)), ...audit];
  }

  /** An audit record as the `audit.record` event that carries it to webhooks. */
  private recordEvent(r: AuditRecord): WharfEvent {
    const ns = r.namespace ?? "";
    return {
      id: crypto.randomUUID(),
      timestamp: r.time,
      kind: "audit.record",
      namespace: ns,
      repository: ns ? repositoryOf(this.cfg, ns).name : "",
      digest: r.digest,
      reference: r.reference,
      tag: null,
      actor: {
        username: r.identity,
        id: null,
        provider: r.provider ?? null,
        client_ip: r.client_ip,
      },
      audit: r,
    };
  }

  /** After a commit that carried planned deliveries: wake the local drainers. */
  committed(planned: PlannedMutation[]): void {
    if (planned.length === 0) return;
    // Only a fan-out is a job: waking the events job lane for outbox entries cost every push a
    // claim (a KV list) that found nothing.
    if (planned.some((m) => m.key[0] === "job")) this.jobs.queue("events").committed(0);
    else if (planned.some((m) => m.key[0] === "evq")) this.wakeOutbox();
  }

  /**
   * Enqueues the async deliveries of `ev` in a commit of their own (for writes whose commit is
   * not built here). A failure is logged, never thrown: the write it follows has succeeded.
   */
  async emit(ev: WharfEvent): Promise<void> {
    if (AUDITED.has(ev.kind)) await this.audit.record(auditFields(ev));
    const hooks = this.webhooks(ev.kind, ev.namespace, "async");
    if (hooks.length === 0) return;
    try {
      if (hooks.length > DIRECT_DELIVERIES_MAX) {
        await this.jobs.queue("events").enqueue(fanoutJob(ev));
      } else {
        await this.writeEntries(hooks, ev);
      }
    } catch (e) {
      log.error("event not queued", { kind: ev.kind, id: ev.id, error: String(e) });
    }
  }

  /**
   * Calls every `required` webhook of `ev` before the operation. A non-2xx answer refuses it
   * (403 DENIED); no answer in time is 503, so clients retry.
   */
  async require(ev: WharfEvent): Promise<void> {
    const hooks = this.webhooks(ev.kind, ev.namespace, "required");
    if (hooks.length === 0) return;
    const body = JSON.stringify(ev);
    await Promise.all(hooks.map(async (h) => {
      try {
        await deliver(h, body, ev.id, ev.kind);
      } catch (e) {
        const status = e instanceof DeliveryError ? e.status : null;
        log.warn("required webhook refused an operation", {
          webhook: h.name,
          kind: ev.kind,
          namespace: ev.namespace,
          error: (e as Error).message,
        });
        if (status !== null) {
          throw new RegistryError("DENIED", `${ev.kind} refused by webhook ${h.name} (${status})`);
        }
        throw unavailable(`webhook ${h.name} required for ${ev.kind} did not answer`, 5);
      }
    }));
  }

  /**
   * blob.corrupt: stored bytes of `digest` failed verification and were taken out of serving
   * (lib/registry/quarantine.ts). Nothing waits on it: async webhooks only.
   */
  async corrupt(ns: string, digest: string, corruption: Corruption): Promise<void> {
    if (!this.wanted("blob.corrupt", ns)) return;
    const ev = this.event("blob.corrupt", { namespace: ns, digest, reference: digest });
    ev.corruption = corruption;
    await this.emit(ev);
  }

  /** An event after a read (manifest.pull): required webhooks, then async deliveries. */
  async notify(kind: EventKind, f: EventFields): Promise<void> {
    if (!this.wanted(kind, f.namespace)) return;
    const ev = this.event(kind, f);
    await this.require(ev);
    await this.emit(ev);
  }

  private async writeEntries(hooks: EventWebhookConfig[], ev: WharfEvent): Promise<void> {
    for (let i = 0; i < hooks.length; i += FANOUT_CHUNK) {
      const op = this.kv.atomic();
      const now = this.now();
      for (const h of hooks.slice(i, i + FANOUT_CHUNK)) {
        const e = outboxEntry(h, ev, now);
        op.set(e.key, e.value);
      }
      await op.commit();
    }
    this.wakeOutbox();
  }

  /** Registers the delivery and fan-out jobs (before the runner starts). */
  register(): void {
    this.jobs.handle("events", DELIVER_KIND, (job) => this.deliverJob(job));
    this.jobs.handle("events", FANOUT_KIND, (job) => this.fanoutJob(job));
  }

  private async deliverJob(job: JobContext): Promise<void> {
    const p = job.payload as DeliverPayload | null;
    if (!p || typeof p.webhook !== "string" || !p.event || typeof p.event !== "object") {
      throw new PermanentJobError("payload needs a webhook and an event");
    }
    const hook = this.cfg.eventWebhooks.find((w) => w.name === p.webhook);
    if (!hook) {
      // Removed by a config reload: nobody to deliver to any more.
      log.info("event dropped: webhook no longer configured", { webhook: p.webhook });
      return;
    }
    await deliver(hook, JSON.stringify(p.event), p.event.id, p.event.kind);
  }

  private async fanoutJob(job: JobContext): Promise<void> {
    const ev = (job.payload as { event?: WharfEvent } | null)?.event;
    if (!ev || typeof ev !== "object" || typeof ev.kind !== "string") {
      throw new PermanentJobError("payload needs an event");
    }
    // A rerun after a crash writes the entries again: a delivery may repeat (at least once).
    await this.writeEntries(this.webhooks(ev.kind, ev.namespace, "async"), ev);
  }
}

/** The kinds that are writes: recorded in the audit trail (pulls and scan results are not). */
const AUDITED = new Set<EventKind>([
  "manifest.push",
  "manifest.delete",
  "tag.create",
  "tag.delete",
  "blob.push",
  "blob.delete",
]);

/** An event's audit record; a blob.push caused by a mount request is recorded as blob.mount. */
function auditFields(ev: WharfEvent): AuditFields {
  const mount = ev.kind === "blob.push" && currentAuditContext()?.action === "mount-blob";
  return {
    action: mount ? "blob.mount" : ev.kind,
    identity: ev.actor.username ?? ev.actor.id,
    provider: ev.actor.provider,
    client_ip: ev.actor.client_ip,
    namespace: ev.namespace,
    reference: ev.reference,
    digest: ev.digest,
    at: Date.parse(ev.timestamp),
  };
}

function fanoutJob(ev: WharfEvent) {
  return { kind: FANOUT_KIND, payload: { event: ev }, lockKey: `fanout|${ev.id}` };
}
