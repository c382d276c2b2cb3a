// The `index-layer` job: which layers get one, and when a push starts them
// (`[global.index] on_push`). The lock key is the digest: many namespaces share one index, and a
// layer already indexed makes the job a no-op.
import { type Config, repositoryOf } from "../config/mod.ts";
import type { ParsedManifest } from "../oci/mod.ts";

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
