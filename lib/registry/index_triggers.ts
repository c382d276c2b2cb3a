// The layer index jobs a push causes (`[global.index] on_push`): one `index-layer` job per tar
// layer of a new image manifest, in the push's own commit. The lock key is the digest: many
// namespaces share one index, and a layer already indexed makes the job a no-op.
import type { Config } from "../config/schema.ts";
import { repositoryOf } from "../config/repositories.ts";
import type { ParsedManifest } from "../oci/manifest.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { PlannedMutation } from "../metadata/mod.ts";

export const INDEX_KIND = "index-layer";

/** Jobs planned inside the push's head commit; more layers than this are queued right after. */
export const INDEX_JOBS_IN_COMMIT = 100;

export function indexLayerJob(digest: string) {
  return { kind: INDEX_KIND, payload: { digest }, lockKey: digest };
}

/** OCI and Docker filesystem layers (gzip, zstd or plain tar); not configs or artifact blobs. */
export function isTarLayer(mediaType: string): boolean {
  return /(^|[.+/])tar($|[.+])/.test(mediaType) || mediaType.includes("rootfs.diff.tar");
}

export function indexesOnPush(cfg: Config, ns: string): boolean {
  const mode = cfg.global.index.onPush;
  if (mode === "none") return false;
  if (mode === "all") return true;
  return !repositoryOf(cfg, ns).upstreams?.length;
}

export function tarLayers(parsed: ParsedManifest): string[] {
  return [...new Set(parsed.layers.filter((l) => isTarLayer(l.mediaType)).map((l) => l.digest))];
}

export class IndexTriggers {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  /** Mutations for the head commit, and the digests left to enqueue after it. */
  plan(ns: string, parsed: ParsedManifest): { mutations: PlannedMutation[]; after: string[] } {
    if (!indexesOnPush(this.cfg, ns)) return { mutations: [], after: [] };
    const layers = tarLayers(parsed);
    const q = this.jobs.queue("index");
    return {
      mutations: layers.slice(0, INDEX_JOBS_IN_COMMIT).flatMap((d) => q.plan(indexLayerJob(d))),
      after: layers.slice(INDEX_JOBS_IN_COMMIT),
    };
  }

  async enqueue(digests: string[]): Promise<void> {
    const q = this.jobs.queue("index");
    for (const d of digests) await q.enqueue(indexLayerJob(d));
  }

  committed(): void {
    this.jobs.queue("index").committed(0);
  }
}
