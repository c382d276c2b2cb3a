// The upstreams of one pull-through repository, tried in their configured order: one that is
// down or lacks the content hands over to the next; any other failure (denied, a digest
// mismatch, a malformed answer) is the answer, since another upstream would only hide it.
import type { UpstreamConfig } from "../config/mod.ts";
import type { Descriptor } from "../oci/mod.ts";
import {
  type BlobResponse,
  type FetchedManifest,
  type ManifestHead,
  UpstreamClient,
  type UpstreamClientOptions,
} from "./client.ts";
import { isUpstreamError, UpstreamError, UpstreamSetError } from "./errors.ts";
import { upstreamName } from "./paths.ts";
import { TokenCache } from "./token_cache.ts";

/** Methods take the LOCAL namespace; each upstream maps it with upstreamName. */
export class UpstreamSet {
  readonly clients: readonly UpstreamClient[];

  constructor(
    readonly repository: string,
    upstreams: readonly UpstreamConfig[],
    options: UpstreamClientOptions = {},
  ) {
    const tokenCache = options.tokenCache ?? new TokenCache();
    this.clients = upstreams.map((u) => new UpstreamClient(u, { ...options, tokenCache }));
  }

  close(): void {
    for (const c of this.clients) c.close();
  }

  headManifest(namespace: string, reference: string, accept?: string | null) {
    return this.first<ManifestHead>(namespace, (c, n) => c.headManifest(n, reference, accept));
  }

  getManifest(
    namespace: string,
    reference: string,
    accept: string | null | undefined,
    maxBytes: number,
  ) {
    return this.first<FetchedManifest>(
      namespace,
      (c, n) => c.getManifest(n, reference, accept, maxBytes),
    );
  }

  headBlob(namespace: string, digest: string) {
    return this.first<{ size: number }>(namespace, (c, n) => c.headBlob(n, digest));
  }

  /** Falls over only until an upstream answers; a body failing mid-stream is the caller's. */
  getBlob(namespace: string, digest: string, range?: string) {
    return this.first<BlobResponse>(namespace, (c, n) => c.getBlob(n, digest, range));
  }

  getReferrers(namespace: string, digest: string, artifactType?: string) {
    return this.first<Descriptor[]>(
      namespace,
      (c, n) => c.getReferrers(n, digest, artifactType),
    );
  }

  private async first<T>(
    namespace: string,
    call: (client: UpstreamClient, name: string) => Promise<T>,
  ): Promise<T> {
    const errors: UpstreamError[] = [];
    for (const c of this.clients) {
      const name = upstreamName(this.repository, namespace, c.url);
      if (name === null) {
        errors.push(new UpstreamError("not-found", c.url, `${namespace} has no upstream name`));
        continue;
      }
      try {
        return await call(c, name);
      } catch (e) {
        const err = isUpstreamError(e) ? e : new UpstreamError("invalid", c.url, String(e));
        errors.push(err);
        if (!err.down && err.kind !== "not-found") break;
      }
    }
    throw new UpstreamSetError(
      `upstreams of repository ${this.repository}`,
      this.clients.map((c) => c.url).join(", "),
      errors,
    );
  }
}
