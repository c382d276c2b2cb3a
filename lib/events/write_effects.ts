// The events (and their audit records) a write causes. `required` webhooks are asked when the
// write begins, before anything is written (a refusal refuses the write); the async deliveries
// and the audit record are planned into the commit that carries the fact, and the local drainers
// are woken once it landed. A fact that happened without a commit (a blob the namespace already
// had) is emitted in a commit of its own.
import { parseDigest } from "../oci/mod.ts";
import type { EventKind } from "../config/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import type {
  EffectSubscriber,
  Outcome,
  SubscriberScope,
  WriteFact,
  WriteIntent,
} from "../effects/mod.ts";
import type { Events } from "./emitter.ts";
import type { EventFields, WharfEvent } from "./event.ts";

export class EventEffects implements EffectSubscriber {
  constructor(private readonly events: Events) {}

  begin(intent: WriteIntent): Promise<SubscriberScope | null> {
    switch (intent.kind) {
      case "manifest-push":
        return this.push(intent);
      case "manifest-fetch":
        return Promise.resolve(null);
      case "image-release":
        return Promise.resolve(this.release(intent));
      case "tag-delete":
        if (intent.digest === null) return Promise.resolve(null);
        return this.once("tag.delete", "tag-deleted", {
          namespace: intent.ns,
          digest: intent.digest,
          reference: intent.tag,
          tag: intent.tag,
        });
      case "manifest-delete":
        return this.once("manifest.delete", "revision-removed", {
          namespace: intent.ns,
          digest: intent.digest,
          reference: intent.digest,
          tag: null,
        });
      case "blob-push":
        return this.perFact("blob.push", "blob-linked", {
          namespace: intent.ns,
          digest: intent.digest,
        });
      case "blob-delete":
        return this.perFact("blob.delete", "blob-unlinked", {
          namespace: intent.ns,
          digest: intent.digest,
          reference: intent.digest,
        });
      case "scan-report":
        // Background work: required webhooks are not consulted.
        return this.perFact("scan.completed", "report-stored", {
          namespace: intent.ns,
          digest: intent.digest,
          reference: intent.digest,
          // Zero counts of a report matched against nothing would read as "clean".
          ...(intent.notChecked === undefined
            ? { severity_counts: { ...intent.counts } }
            : { vulnerabilities_checked: false, not_checked: intent.notChecked }),
        }, false);
    }
  }

  /** manifest.push with the head commit, tag.create with each tag the push creates or moves. */
  private async push(
    intent: Extract<WriteIntent, { kind: "manifest-push" }>,
  ): Promise<SubscriberScope | null> {
    const ev = this.events;
    const { ns, digest, reference } = intent;
    if (!ev.wanted("manifest.push", ns) && !ev.wanted("tag.create", ns)) return null;
    const push = ev.event("manifest.push", {
      namespace: ns,
      digest,
      reference,
      tag: parseDigest(reference) ? null : reference,
    });
    await ev.require(push);
    if (ev.webhooks("tag.create", ns, "required").length > 0) {
      for (const tag of intent.tags) {
        await ev.require(ev.event("tag.create", { namespace: ns, digest, reference, tag }));
      }
    }
    return this.scope((fact) => {
      if (fact.kind === "manifest-pushed") return ev.plan(push);
      // A re-push of the digest a tag already names refreshes it but creates nothing.
      if (fact.kind !== "tag-changed" || fact.previous?.digest === digest) return [];
      return ev.plan(ev.event("tag.create", { namespace: ns, digest, reference, tag: fact.tag }));
    });
  }

  /**
   * tag.create for each tag a release of a held image writes: the tag becomes visible then. A
   * release follows a verdict, not a client's request for the tag: required webhooks were asked
   * when the image was pushed.
   */
  private release(
    intent: Extract<WriteIntent, { kind: "image-release" }>,
  ): SubscriberScope | null {
    const ev = this.events;
    const { ns, digest } = intent;
    if (!ev.wanted("tag.create", ns)) return null;
    return this.scope((fact) => {
      if (fact.kind !== "tag-changed") return [];
      return ev.plan(
        ev.event("tag.create", { namespace: ns, digest, reference: fact.tag, tag: fact.tag }),
      );
    });
  }

  /** One event, asked of required webhooks and planned as it was asked. */
  private async once(
    kind: EventKind,
    on: WriteFact["kind"],
    f: EventFields,
  ): Promise<SubscriberScope | null> {
    const ev = this.events;
    if (!ev.wanted(kind, f.namespace)) return null;
    const e = ev.event(kind, f);
    await ev.require(e);
    return this.scope((fact) => fact.kind === on ? ev.plan(e) : []);
  }

  /** An event whose digest is known only from the fact (the blob a push linked). */
  private async perFact(
    kind: EventKind,
    on: WriteFact["kind"],
    f: EventFields,
    consultRequired = true,
  ): Promise<SubscriberScope | null> {
    const ev = this.events;
    if (!ev.wanted(kind, f.namespace)) return null;
    if (consultRequired) await ev.require(ev.event(kind, f));
    const fired = (fact: WriteFact): WharfEvent => ev.event(kind, { ...f, digest: fact.digest });
    return this.scope(
      (fact) => fact.kind === on ? ev.plan(fired(fact)) : [],
      (fact) => fact.kind === on ? ev.emit(fired(fact)) : Promise.resolve(),
    );
  }

  private scope(
    plan: (fact: WriteFact) => PlannedMutation[],
    alone: (fact: WriteFact) => Promise<void> = () => Promise.resolve(),
  ): SubscriberScope {
    const ev = this.events;
    return {
      mutationsFor: plan,
      async committed(outcome: Outcome): Promise<void> {
        ev.committed(outcome.landed.flatMap((l) => l.mutations));
        for (const fact of outcome.unwritten) await alone(fact);
      },
    };
  }
}
