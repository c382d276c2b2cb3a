// The UI talks to Wharf over its public HTTP API only (OCI + `_svc`), like any other client.

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export async function getJson<T>(path: string): Promise<T> {
  const r = await fetch(path, { headers: { accept: "application/json" } });
  if (!r.ok) {
    let message = `${r.status} ${r.statusText}`;
    try {
      const body = await r.json();
      message = body?.errors?.[0]?.message ?? message;
    } catch {
      // not an OCI error body
    }
    throw new ApiError(r.status, message);
  }
  return await r.json() as T;
}

export interface UiConfig {
  name: string;
  oidc?: { issuer: string; client_id: string; scopes: string };
}

export interface RepositorySummary {
  name: string;
  namespace_count: number;
  pull_through_cache: boolean;
  upstream_urls: string[];
  immutable_tags: boolean;
}

export interface NamespaceSummary {
  name: string;
  tag_count: number;
  manifest_count: number;
  upload_count: number;
}

export interface NamespacesListing {
  repository: string;
  namespaces: NamespaceSummary[];
  pull_through_cache: boolean;
  upstream_urls: string[];
  immutable_tags: boolean;
}

export interface Revision {
  digest: string;
  tags: string[];
  parents?: { digest: string; tags: string[]; platform: { os: string; architecture: string } }[];
  referrers?: { digest: string; artifactType: string }[];
  pushed_at?: string;
  last_pulled_at?: string;
}

/** A namespace's path in API URLs: each segment escaped, the slashes kept. */
export const nsPath = (ns: string) => ns.split("/").map(encodeURIComponent).join("/");
