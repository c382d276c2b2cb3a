// Which replication jobs a write causes (issue: replication triggers). Every manifest push, tag
// create/move, manifest delete and tag delete in a replicated namespace plans one job per
// downstream, returned as mutations for the write's own commit, so an acknowledged write never
// loses its job. Pushes of one tag share a lock key (the job re-reads the tag when it runs, so
// repeated pushes coalesce); every delete gets its own, so distinct deletes never fold.
import type { Config, DownstreamConfig } from "../config/schema.ts";
import { repositoryOf } from "../config/repositories.ts";
import type { PlannedMutation } from "../metadata/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";

export const REPLICATION_KINDS = {
  pushTag: "push-tag",
  pushDigest: "push-digest",
  deleteTag: "delete-tag",
  deleteDigest: "delete-digest",
} as const;

export interface ReplicationPayload {
  downstream: string;
  namespace: string;
  tag?: string;
  digest?: string;
  /** deletes: the event's time (ms), sent as X-Svc-Source-Timestamp */
  at?: number;
}

/** The job that brings `downstream`'s copy of `ns:tag` up to date (also used by reconcile). */
export function pushTagJob(downstream: string, ns: string, tag: string) {
  return {
    kind: REPLICATION_KINDS.pushTag,
    payload: { downstream, namespace: ns, tag } satisfies ReplicationPayload,
    lockKey: `push|${downstream}|${ns}:${tag}`,
  };
}

/** The job that deletes `ns:tag` on `downstream` as of `at`; every delete is distinct. */
export function deleteTagJob(downstream: string, ns: string, tag: string, at: number) {
  return {
    kind: REPLICATION_KINDS.deleteTag,
    payload: { downstream, namespace: ns, tag, at } satisfies ReplicationPayload,
    lockKey: `delete|${downstream}|${ns}:${tag}|${crypto.randomUUID()}`,
  };
}

/** Downstreams that take `ns`'s writes as they happen (modes `event`, `event+reconcile`). */
export function downstreamsOf(cfg: Config, ns: string, forEvents = true): DownstreamConfig[] {
  const all = repositoryOf(cfg, ns).downstreams ?? [];
  return all.filter((d) =>
    (!forEvents || d.mode !== "reconcile") &&
    (d.namespaceFilter.length === 0 || d.namespaceFilter.some((re) => re.test(ns)))
  );
}

export class ReplicationTriggers {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  private plan(
    ns: string,
    payload: (d: string) => ReplicationPayload,
    kind: string,
    lock: (d: string) => string,
  ) {
    const q = this.jobs.queue("replication");
    return downstreamsOf(this.cfg, ns).flatMap((d) =>
      q.plan({ kind, payload: payload(d.name), lockKey: lock(d.name) })
    );
  }

  /** Whether writes to `ns` cause jobs at all (callers skip the hooks otherwise). */
  replicates(ns: string): boolean {
    return downstreamsOf(this.cfg, ns).length > 0;
  }

  tagPushed(ns: string, tag: string): PlannedMutation[] {
    const q = this.jobs.queue("replication");
    return downstreamsOf(this.cfg, ns).flatMap((d) => q.plan(pushTagJob(d.name, ns, tag)));
  }

  revisionPushed(ns: string, digest: string): PlannedMutation[] {
    return this.plan(
      ns,
      (downstream) => ({ downstream, namespace: ns, digest }),
      REPLICATION_KINDS.pushDigest,
      (d) => `push|${d}|${ns}@${digest}`,
    );
  }

  tagDeleted(ns: string, tag: string, at: number): PlannedMutation[] {
    const q = this.jobs.queue("replication");
    return downstreamsOf(this.cfg, ns).flatMap((d) => q.plan(deleteTagJob(d.name, ns, tag, at)));
  }

  revisionDeleted(ns: string, digest: string, at: number): PlannedMutation[] {
    const id = crypto.randomUUID();
    return this.plan(
      ns,
      (downstream) => ({ downstream, namespace: ns, digest, at }),
      REPLICATION_KINDS.deleteDigest,
      (d) => `delete|${d}|${ns}@${digest}|${id}`,
    );
  }

  /** After a commit that carried jobs: count them and wake this process's workers. */
  committed(): void {
    this.jobs.queue("replication").committed(0);
  }
}
