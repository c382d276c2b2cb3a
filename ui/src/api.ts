// The UI talks to Wharf over its public HTTP API only (OCI + `_svc`), like any other client.

export class ApiError extends Error {
  /** the OCI error code (`UNSUPPORTED`, `PROVIDER_UNAVAILABLE`, …); "" without an OCI body */
  readonly code: string;
  /** seconds of the answer's `Retry-After`, when it had one */
  readonly retryAfter: number | null;

  /** `detail` is the server's reason (an OCI error body's `detail`), shown beside the message. */
  constructor(
    readonly status: number,
    message: string,
    readonly detail = "",
    extra: { code?: string; retryAfter?: number | null } = {},
  ) {
    super(message);
    this.code = extra.code ?? "";
    this.retryAfter = extra.retryAfter ?? null;
  }
}

/** Where the signed-in user's bearer token comes from; set by the sign-in module. */
let tokenSource: () => string | null = () => null;
export function setTokenSource(source: () => string | null) {
  tokenSource = source;
}

/**
 * A request to Wharf's API with the UI's standing headers: the bearer token when signed in,
 * `X-Svc-No-Redirect` so blob bytes come inline instead of as a redirect to a store the browser
 * may not reach (SPEC UI behaviour 9), and `X-Svc-No-Pull-Record` so its manifest reads are not
 * recorded as pulls.
 */
export function apiFetch(
  path: string,
  init: RequestInit = {},
): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("x-svc-no-redirect", "1");
  // Browsing is not pulling: manifest reads stay out of the pull history.
  headers.set("x-svc-no-pull-record", "1");
  const token = tokenSource();
  if (token) headers.set("authorization", `Bearer ${token}`);
  // "omit": the UI's only credential is the bearer header above; it also keeps Chromium from
  // answering a `WWW-Authenticate: Basic` challenge with its own password dialog.
  return fetch(path, { ...init, headers, credentials: "omit" });
}

/** Throws an ApiError carrying the status and the OCI error message for a non-2xx answer. */
export async function checked(r: Response): Promise<Response> {
  if (!r.ok) {
    let message = `${r.status} ${r.statusText}`;
    let detail = "";
    let code = "";
    try {
      const body = await r.json();
      message = body?.errors?.[0]?.message ?? message;
      const d = body?.errors?.[0]?.detail;
      if (typeof d === "string") detail = d;
      const c = body?.errors?.[0]?.code;
      if (typeof c === "string") code = c;
    } catch {
      // not an OCI error body
    }
    const ra = r.headers.get("retry-after");
    const retryAfter = ra !== null && /^\d+$/.test(ra) ? Number(ra) : null;
    throw new ApiError(r.status, message, detail, { code, retryAfter });
  }
  return r;
}

export async function getJson<T>(path: string): Promise<T> {
  const r = await checked(
    await apiFetch(path, { headers: { accept: "application/json" } }),
  );
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

/** One downstream in GET /v2/_svc/replication/status (docs/api.md). */
export interface DownstreamStatus {
  repository: string;
  name: string;
  url: string;
  mode: string;
  prune: boolean;
  pending: number;
  oldest_pending_secs: number;
  failed: number;
  last_success_at: string | null;
  last_error: { at: string; outcome: string; message: string } | null;
  outcomes: Record<string, number>;
  supports: { tag_delete: boolean | null; digest_delete: boolean | null };
  health: "ok" | "lagging" | "failing";
}

export interface ReplicationStatus {
  downstreams: DownstreamStatus[];
  syncs: Record<string, unknown>[];
  truncated: boolean;
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
  parents?: {
    digest: string;
    tags: string[];
    platform: { os: string; architecture: string };
  }[];
  referrers?: { digest: string; artifactType: string }[];
  pushed_at?: string;
  last_pulled_at?: string;
  /** bytes a pull fetches (an index: with its platforms'); absent from older servers */
  size?: number;
  /** a single-platform image's platform, from its config */
  platform?: { os: string; architecture: string; variant?: string };
  /** where the repository verifies signatures: verified, unverified, held or unjudged */
  signature?: "verified" | "unverified" | "held" | "unjudged";
  /** tags a held image takes once released */
  held_tags?: string[];
}

/** One record of GET /v2/_svc/audit (docs/api.md). */
export interface AuditRecord {
  id: string;
  time: string;
  action: string;
  outcome: "ok" | "denied" | "failed";
  identity: string | null;
  client_ip: string | null;
  namespace: string | null;
  reference: string | null;
  digest: string | null;
  request_id: string | null;
  detail?: string;
  suppressed?: number;
}

/** A namespace's path in API URLs: each segment escaped, the slashes kept. */
export const nsPath = (ns: string) => ns.split("/").map(encodeURIComponent).join("/");
