// The HTTP edge: one catch-all that maps each request to its Action, authorizes it and hands it
// to a thin handler. No storage or KV call lives in routes/.
import { type Context, Hono } from "hono";
import type { Registry } from "../lib/registry/mod.ts";
import { resolveNsParam } from "../lib/config/mod.ts";
import { isValidName, RegistryError } from "../lib/oci/mod.ts";
import { type Action, parseAction } from "./actions.ts";
import { errorResponse } from "./errors.ts";
import { blobHandler } from "./blobs.ts";
import { uploadHandler } from "./uploads.ts";
import { manifestHandler } from "./manifests.ts";
import { listingHandler } from "./listings.ts";
import { svcHandler } from "./svc.ts";
import { jobsHandler, queueOf } from "./jobs.ts";
import { replicationStatusHandler } from "./replication_status.ts";
import { healthHandler } from "./health.ts";
import { Gate, type RequestContext } from "./authorize.ts";
import { tokenHandler } from "./token.ts";
import {
  AuthenticationError,
  type Authenticator,
  AuthorizationWebhooks,
  type ClientIpResolver,
} from "../lib/auth/mod.ts";
import type { CertificateSubject } from "../lib/auth/mod.ts";
import type { PolicySet } from "../lib/policy/mod.ts";
import type { Metrics } from "../lib/metrics/mod.ts";
import type { LayerIndex } from "../lib/index/mod.ts";
import { layerHandler } from "./layers.ts";
import { diffHandler, vulnerabilitiesHandler } from "./vulnerabilities.ts";
import { filesSearchHandler } from "./files.ts";
import type { Reports } from "../lib/scan/mod.ts";
import { countAuth, instrumentFetch, metricsHandler, noteAction } from "./metrics.ts";
import { uiAction, uiHandler } from "./ui.ts";
import { applyRateLimit, rateLimiterFor } from "./rate_limit.ts";
import { anonymousActor, identifyActor, withActor } from "../lib/events/mod.ts";
import { auditAction, audited, auditHandler } from "./audit.ts";

export interface Services {
  registry: Registry;
  authenticator: Authenticator;
  policies: PolicySet;
  clientIp: ClientIpResolver;
  /** absent: no instrumentation, /metrics answers 404 */
  metrics?: Metrics;
  /** absent: the layer endpoints answer 404 */
  layers?: LayerIndex;
  reports?: Reports;
}

/** What the listener knows about the connection (Deno.serve or the TLS listener). */
export interface ConnEnv {
  remoteAddr: string;
  certificate: CertificateSubject | null;
}

/** Per-request authorization callbacks for handlers that consult other namespaces. */
export interface Handlers {
  canRead: (ns: string, digest: string) => boolean;
  /**
   * Mount rules 1-2: may the caller take `digest` from `ns`? Its `get-blob` there, by the
   * policies and then the authorization webhook, as a GET of the blob would be.
   */
  canMountFrom: (ns: string, digest: string) => Promise<boolean>;
  canListTags: (ns: string) => boolean;
  /** who is pulling, as pull history records it: username, else id, else `anonymous` */
  client: string;
}

const PULLS = new Set(["get-manifest", "get-blob", "list-tags", "get-referrers"]);
/** Client writes: refused in a pull-through repository, which mirrors its upstreams. */
const WRITES = new Set([
  "put-manifest",
  "delete-manifest",
  "delete-blob",
  "start-upload",
  "get-upload",
  "update-upload",
  "complete-upload",
  "cancel-upload",
]);
const JOB_ACTIONS = new Set(["list-jobs", "list-failed-jobs", "retry-job", "delete-job"]);

export function createApp(services: Services): Hono<{ Bindings: ConnEnv }> {
  const app = new Hono<{ Bindings: ConnEnv }>();
  const reg = services.registry;
  const gate = new Gate(
    reg.cfg,
    services.policies,
    new AuthorizationWebhooks(reg.cfg, services.metrics?.observeAuthzWebhook),
  );
  const limiter = rateLimiterFor(reg, services.metrics);
  app.onError((err, c) => errorResponse(err, c));
  app.notFound((c) => errorResponse(notFound(c.req.method), c));

  // Events planned while a request is handled name its identity (filled in once authenticated).
  app.all(
    "*",
    (c) => withActor(anonymousActor(), () => audited(reg.events.audit, c.req.raw, () => handle(c))),
  );
  const handle = async (c: Context<{ Bindings: ConnEnv }>) => {
    const req = c.req.raw;
    const url = new URL(req.url);
    const action = parseAction(req.method, url.pathname) ??
      uiAction(reg.cfg.ui.enabled, req.method, url.pathname);
    if (!action) {
      await req.body?.cancel();
      throw notFound(req.method);
    }
    noteAction(req, action.name);
    auditAction(action, action.name === "start-upload" ? url.searchParams.get("mount") : null);
    const extra = new Headers({ "Docker-Distribution-API-Version": "registry/2.0" });
    applyNsParam(reg, action, url, extra);
    const env = c.env ?? { remoteAddr: "", certificate: null };
    const origin = services.clientIp.origin(env.remoteAddr, req.url, req.headers);
    let ctx: RequestContext;
    try {
      ctx = {
        method: req.method,
        origin,
        clientIp: services.clientIp.resolve(env.remoteAddr, req.headers.get("x-forwarded-for")),
        auth: await services.authenticator.authenticate(
          req.headers.get("authorization"),
          env.certificate,
        ),
      };
      countAuth(services.metrics, ctx.auth, null);
      identifyActor({
        username: ctx.auth.identity.username ?? null,
        id: ctx.auth.identity.id ?? null,
        client_ip: ctx.clientIp || null,
      });
    } catch (e) {
      if (!(e instanceof AuthenticationError)) throw e;
      countAuth(services.metrics, null, req.headers.get("authorization"));
      await req.body?.cancel();
      throw gate.unauthorized(action, e.message, origin);
    }
    // The namespaces listing names its repository in the query: let rules see it.
    const repo = action.name === "list-namespaces" ? url.searchParams.get("repository") : null;
    gate.check(
      ctx,
      action,
      repo && isValidName(repo)
        ? { repository: repo }
        : JOB_ACTIONS.has(action.name)
        ? { queue: queueOf(url) }
        : {},
    );
    const mount = action.name === "start-upload" ? url.searchParams.get("mount") : null;
    if (mount !== null) {
      // Mount has its own action; the source's get-blob is checked by the mount itself.
      gate.check(ctx, { name: "mount-blob", namespace: action.namespace, digest: mount });
    }
    try {
      await gate.checkWebhook(ctx, action, req.headers);
      await applyRateLimit(limiter, ctx, action, extra);
    } catch (e) {
      await req.body?.cancel();
      throw e;
    }
    if (WRITES.has(action.name)) {
      try {
        reg.assertWritable(action.namespace!);
      } catch (e) {
        await req.body?.cancel();
        throw e;
      }
    }
    const h: Handlers = {
      canRead: (ns, digest) => gate.allows(ctx, { name: "get-blob", namespace: ns, digest }),
      canMountFrom: async (ns, digest) => {
        const read: Action = { name: "get-blob", namespace: ns, digest };
        return gate.allows(ctx, read) && await gate.webhookAllows(ctx, read, req.headers);
      },
      canListTags: (ns) => gate.allows(ctx, { name: "list-tags", namespace: ns }),
      client: ctx.auth.identity.username ?? ctx.auth.identity.id ?? "anonymous",
    };
    if (action.name === "get-token") {
      return await tokenHandler(
        ctx,
        services.authenticator,
        () => gate.unauthorized(action, "registry tokens cannot be exchanged", origin),
      );
    }
    if (action.name === "metrics") return await metricsHandler(req, services.metrics);
    if (action.name === "ui-asset") return await uiHandler(req, url);
    if (action.name === "get-report") {
      return await vulnerabilitiesHandler(req, url, action, services.reports, extra, reg);
    }
    if (action.name === "search-files") {
      return await filesSearchHandler(req, url, action, reg, extra, h.canRead, h.canListTags);
    }
    if (action.name === "diff-images") {
      return await diffHandler(req, url, action, services.reports, extra);
    }
    if (action.resource?.startsWith("layer-")) {
      return await layerHandler(req, url, action, services.layers, extra);
    }
    return await dispatch(req, url, action, reg, extra, h);
  };
  if (services.metrics) {
    const inner = app.fetch;
    app.fetch = instrumentFetch(
      services.metrics,
      (req: Request, env?: ConnEnv | Record<never, never>) => inner(req, env),
    );
  }
  return app;
}

function notFound(method: string): RegistryError {
  return method === "GET" || method === "HEAD"
    ? new RegistryError("NAME_UNKNOWN", "no such route")
    : new RegistryError("UNSUPPORTED", "no such route");
}

/** `?ns=` on a pull names the registry namespace a mirroring client believes it addresses. */
function applyNsParam(reg: Registry, a: Action, url: URL, extra: Headers): void {
  if (!PULLS.has(a.name)) return;
  const ns = url.searchParams.get("ns");
  const mapped = resolveNsParam(reg.cfg, ns, a.namespace!);
  if (mapped === null) return;
  a.namespace = mapped;
  extra.set("OCI-Namespace", ns!);
}

function dispatch(
  req: Request,
  url: URL,
  a: Action,
  reg: Registry,
  extra: Headers,
  h: Handlers,
): Promise<Response> | Response {
  switch (a.name) {
    case "get-api-version":
      extra.set("Content-Type", "application/json");
      return new Response(req.method === "HEAD" ? null : "{}", { status: 200, headers: extra });
    case "get-blob":
    case "delete-blob":
      return blobHandler(req, a, reg, extra);
    case "start-upload":
    case "get-upload":
    case "update-upload":
    case "complete-upload":
    case "cancel-upload":
      return uploadHandler(req, url, a, reg, extra, h);
    case "get-manifest":
    case "put-manifest":
    case "delete-manifest":
      return manifestHandler(req, url, a, reg, extra, h);
    case "list-tags":
    case "list-catalog":
    case "get-referrers":
      return listingHandler(req, url, a, reg, extra, h);
    case "healthz":
    case "readyz":
      return healthHandler(req, a, reg);
    case "list-repositories":
    case "list-namespaces":
    case "list-revisions":
    case "list-uploads":
    case "ui-config":
      return svcHandler(req, url, a, reg, extra, h);
    case "list-jobs":
    case "list-failed-jobs":
    case "retry-job":
    case "delete-job":
      return jobsHandler(req, url, a, reg, extra);
    case "replication-status":
      return replicationStatusHandler(req, url, reg, extra);
    case "list-audit":
      return auditHandler(req, url, reg, extra);
    case "mount-blob":
    case "get-token":
    case "metrics":
    case "get-report":
    case "diff-images":
    case "search-files":
    case "ui-asset":
      throw new Error(`${a.name} is not dispatched here`);
  }
}
