// Event webhooks (issue 14). A write that causes an event plans its async deliveries as jobs on
// the `events` queue inside the write's own commit (plan), or, where the write's commit is not
// ours to extend (blob links, scan reports, pulls), enqueues them right after it (emit). Each
// delivery job targets one webhook: it retries with the queue's backoff, up to the webhook's
// max_retries, and is then dead-lettered (visible at /v2/_svc/jobs/failed?queue=events). When
// more webhooks want an event than fit a commit comfortably, one fan-out job carries it and
// enqueues the deliveries when it runs, so a commit never grows with the number of webhooks.
// `required` webhooks are called before the operation (require) and a failure fails it.
import { type Config, type EventKind, type EventWebhookConfig } from "../config/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import type { JobContext, JobQueues } from "../jobs/mod.ts";
import { PermanentJobError } from "../jobs/mod.ts";
import type { PlannedMutation } from "../metadata/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import { log } from "../log.ts";
import { currentActor } from "./actor.ts";
import { deliver, DeliveryError } from "./deliver.ts";
import type { EventFields, WharfEvent } from "./event.ts";

export const DELIVER_KIND = "deliver-event";
export const FANOUT_KIND = "fanout-event";
/** Up to this many deliveries are planned in the causing commit; more go through a fan-out. */
export const DIRECT_DELIVERIES_MAX = 4;

interface DeliverPayload {
  webhook: string;
  event: WharfEvent;
}

export class Events {
  constructor(
    private readonly cfg: Config,
    private readonly jobs: JobQueues,
    private readonly now: () => number = Date.now,
  ) {}

  /** Webhooks of `policy` that want `kind` events of `ns`, as configured now. */
  webhooks(kind: EventKind, ns: string, policy: "async" | "required"): EventWebhookConfig[] {
    return this.cfg.eventWebhooks.filter((w) =>
      w.policy === policy && (w.events.length === 0 || w.events.includes(kind)) &&
      (w.repositoryFilter.length === 0 || w.repositoryFilter.some((re) => re.test(ns)))
    );
  }

  /** Whether any webhook wants `kind` events of `ns` (callers skip building events otherwise). */
  wanted(kind: EventKind, ns: string): boolean {
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
    return ev;
  }

  /** The async deliveries of `ev` as mutations for the causing write's commit. */
  plan(ev: WharfEvent): PlannedMutation[] {
    const hooks = this.webhooks(ev.kind, ev.namespace, "async");
    if (hooks.length === 0) return [];
    const q = this.jobs.queue("events");
    if (hooks.length > DIRECT_DELIVERIES_MAX) {
      return q.plan({ kind: FANOUT_KIND, payload: { event: ev }, lockKey: `fanout|${ev.id}` });
    }
    return hooks.flatMap((h) => q.plan(deliveryJob(h, ev)));
  }

  /** After a commit that carried planned deliveries: count them and wake local workers. */
  committed(planned: PlannedMutation[]): void {
    if (planned.length) this.jobs.queue("events").committed(planned.length / 2);
  }

  /**
   * Enqueues the async deliveries of `ev` in a commit of their own (for writes whose commit is
   * not built here). A failure is logged, never thrown: the write it follows has succeeded.
   */
  async emit(ev: WharfEvent): Promise<void> {
    const hooks = this.webhooks(ev.kind, ev.namespace, "async");
    if (hooks.length === 0) return;
    const q = this.jobs.queue("events");
    try {
      if (hooks.length > DIRECT_DELIVERIES_MAX) {
        await q.enqueue({ kind: FANOUT_KIND, payload: { event: ev }, lockKey: `fanout|${ev.id}` });
      } else {
        for (const h of hooks) await q.enqueue(deliveryJob(h, ev));
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
        throw new RegistryError(
          "PROVIDER_UNAVAILABLE",
          `webhook ${h.name} required for ${ev.kind} did not answer`,
          { headers: { "Retry-After": "5" } },
        );
      }
    }));
  }

  /**
   * An operation whose commit is not built here (blob links and unlinks): required webhooks
   * first, then `op`, then the async deliveries when `fired` says the event happened.
   */
  async around<T>(
    kind: EventKind,
    f: EventFields,
    op: () => Promise<T>,
    fired: (r: T) => EventFields | null = () => f,
  ): Promise<T> {
    if (!this.wanted(kind, f.namespace)) return await op();
    await this.require(this.event(kind, f));
    const r = await op();
    const done = fired(r);
    if (done) await this.emit(this.event(kind, done));
    return r;
  }

  /** An event after a read (manifest.pull): required webhooks, then async deliveries. */
  async notify(kind: EventKind, f: EventFields): Promise<void> {
    if (!this.wanted(kind, f.namespace)) return;
    const ev = this.event(kind, f);
    await this.require(ev);
    await this.emit(ev);
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
    const q = this.jobs.queue("events");
    // A rerun after a crash re-enqueues: lock keys fold duplicates still pending, and a
    // delivery that already finished is sent again (at least once).
    for (const h of this.webhooks(ev.kind, ev.namespace, "async")) {
      await q.enqueue(deliveryJob(h, ev));
    }
  }
}

function deliveryJob(h: EventWebhookConfig, ev: WharfEvent) {
  return {
    kind: DELIVER_KIND,
    payload: { webhook: h.name, event: ev } satisfies DeliverPayload,
    lockKey: `deliver|${ev.id}|${h.name}`,
    maxAttempts: h.maxRetries + 1,
  };
}
