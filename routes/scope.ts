// What a handler is given: one RequestScope per request, built by app.ts once the request is
// authenticated, authorized and admitted, so every handler has the same one-argument signature
// and no route file needs app.ts.
import type { Registry } from "../lib/registry/mod.ts";
import type {
  Authenticator,
  CertificateSubject,
  ClientIpResolver,
  RefusedCertificate,
} from "../lib/auth/mod.ts";
import type { RegistryError } from "../lib/oci/mod.ts";
import type { PolicySet } from "../lib/policy/mod.ts";
import type { Metrics } from "../lib/metrics/mod.ts";
import type { LayerIndex } from "../lib/index/mod.ts";
import type { Reports } from "../lib/scan/mod.ts";
import type { HttpParts } from "../lib/services/mod.ts";
import type { Action } from "./actions.ts";
import type { RequestContext } from "./authorize.ts";
import type { Query } from "./query.ts";

/**
 * What the HTTP app is built from and its handlers share for its lifetime: the part of the
 * process's Services (lib/services) that commands/http_app.ts hands to routes. The HttpParts
 * (rate limiter, file search, replication status) read the metadata KV; lib/services binds them
 * to it, so no handler holds the KV.
 */
export interface AppServices extends HttpParts {
  registry: Registry;
  authenticator: Authenticator;
  policies: PolicySet;
  clientIp: ClientIpResolver;
  /** absent: no instrumentation, /metrics answers 404 */
  metrics?: Metrics;
  /** absent: the layer endpoints answer 404 */
  layers?: LayerIndex;
  reports?: Reports;
  /**
   * What keeps the stores from taking writes (lib/storage StoreWatch: free space, faults), for
   * /readyz; absent: /readyz asks the KV only.
   */
  watch?: { problems(): Promise<string[]> };
}

/** What the listener knows about the connection (Deno.serve or the TLS listener). */
export interface ConnEnv {
  remoteAddr: string;
  certificate: CertificateSubject | RefusedCertificate | null;
  /** settles once the answer was sent or the client left; absent where the server cannot say */
  completed?: Promise<void>;
}

/** Authorization questions a handler asks about other namespaces than its action's. */
export interface Access {
  canRead: (ns: string, digest: string) => boolean;
  /**
   * Mount rules 1-2: may the caller take `digest` from `ns`? Its `get-blob` there, by the
   * policies and then the authorization webhook, as a GET of the blob would be.
   */
  canMountFrom: (ns: string, digest: string) => Promise<boolean>;
  canListTags: (ns: string) => boolean;
  /** whether a policy explicitly grants `get-held` on `ns@digest` (issue 34) */
  canViewHeld: (ns: string, digest: string) => boolean;
  /** 401 with the challenge for this request's action */
  unauthorized: (detail: string) => RegistryError;
}

export interface RequestScope {
  req: Request;
  url: URL;
  /** the request's query, refusing as extension endpoints do unless a handler says otherwise */
  query: Query;
  action: Action;
  head: boolean;
  registry: Registry;
  services: AppServices;
  /** headers every answer carries (API version, `OCI-Namespace`, rate limits): handlers add theirs */
  headers: Headers;
  /** the authenticated caller */
  caller: RequestContext;
  access: Access;
  /** who is pulling, as pull history records it: username, else id, else `anonymous` */
  client: string;
  /** settles once the answer was sent or the client left (null: the server cannot say) */
  sent: Promise<void> | null;
}

export type Handler = (s: RequestScope) => Promise<Response> | Response;
