// Replication's jobs: one per downstream for every manifest push, tag create/move, manifest
// delete and tag delete in a replicated namespace (write_effects.ts plans them into the write's
// own commit; reconcile.ts enqueues them too). Pushes of one tag share a lock key (the job
// re-reads the tag when it runs, so repeated pushes coalesce); every delete gets its own, so
// distinct deletes never fold.
import { type Config, type DownstreamConfig, repositoryOf } from "../config/mod.ts";

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

/** The job that pushes the untagged revision `ns@digest` to `downstream`. */
export function pushDigestJob(downstream: string, ns: string, digest: string) {
  return {
    kind: REPLICATION_KINDS.pushDigest,
    payload: { downstream, namespace: ns, digest } satisfies ReplicationPayload,
    lockKey: `push|${downstream}|${ns}@${digest}`,
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

/** The job that deletes `ns@digest` on `downstream` as of `at`; `id` tells deletes apart. */
export function deleteDigestJob(
  downstream: string,
  ns: string,
  digest: string,
  at: number,
  id: string,
) {
  return {
    kind: REPLICATION_KINDS.deleteDigest,
    payload: { downstream, namespace: ns, digest, at } satisfies ReplicationPayload,
    lockKey: `delete|${downstream}|${ns}@${digest}|${id}`,
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
