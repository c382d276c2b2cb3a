// The HTTP edge: one catch-all that maps each request to its Action, authorizes it and hands it
// to a thin handler. No storage or KV call lives in routes/.
import { type Context, Hono } from "hono";
import type { Registry } from "../lib/registry/mod.ts";
import { resolveNsParam } from "../lib/config/mod.ts";
import { isValidName, RegistryError } from "../lib/oci/mod.ts";
import { type Action, comparedRefs, parseAction, pushTags } from "./actions.ts";
import { errorResponse } from "./errors.ts";
import { blobHandler } from "./blobs.ts";
import { uploadHandler } from "./uploads.ts";
import { manifestHandler } from "./manifests.ts";
import { signaturesHandler } from "./signatures.ts";
import { listingHandler } from "./listings.ts";
import { svcHandler } from "./svc.ts";
import { jobsHandler, queueOf } from "./jobs.ts";
import { jobProgressHandler } from "./job_progress.ts";
import { replicationStatusHandler } from "./replication_status.ts";
import { healthHandler } from "./health.ts";
import { decisionsOf, Gate, type RequestContext } from "./authorize.ts";
import { tokenHandler } from "./token.ts";
import { AuthenticationError, AuthorizationWebhooks } from "../lib/auth/mod.ts";
import { layerHandler } from "./layers.ts";
import { diffHandler, vulnerabilitiesHandler } from "./vulnerabilities.ts";
import { filesSearchHandler } from "./files.ts";
import { countAuth, instrumentFetch, metricsHandler, noteAction } from "./metrics.ts";
import { uiAction, uiHandler } from "./ui.ts";
import { applyRateLimit } from "./rate_limit.ts";
import { anonymousActor, identifyActor, withActor } from "../lib/events/mod.ts";
import { auditAction, audited, auditHandler } from "./audit.ts";
import { Query } from "./query.ts";
import type { AppServices, ConnEnv, Handler, RequestScope } from "./scope.ts";

export type { AppServices, ConnEnv } from "./scope.ts";

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
/** Actions naming one image whose verdict CEL rules may read as `image`. */
const IMAGE_ACTIONS = new Set(["get-manifest", "get-signatures"]);

export function createApp(services: AppServices): Hono<{ Bindings: ConnEnv }> {
  const app = new Hono<{ Bindings: ConnEnv }>();
  const reg = services.registry;
  const gate = new Gate(
    reg.cfg,
    services.policies,
    new AuthorizationWebhooks(reg.cfg, services.metrics?.observeAuthzWebhook),
  );
  const limiter = services.limiter;
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
    const query = new Query(url.searchParams);
    const action = parseAction(req.method, url.pathname) ??
      uiAction(reg.cfg.ui.enabled, req.method, url.pathname, req.headers.get("accept"));
    if (!action) {
      await req.body?.cancel();
      throw notFound(req.method);
    }
    noteAction(req, action.name);
    try {
      const tags = pushTags(action, query.all("tag"));
      if (tags) action.tags = tags;
      const compared = comparedRefs(action, query.all("from"), query.all("to"));
      if (compared) action.compared = compared;
    } catch (e) {
      await req.body?.cancel();
      throw e;
    }
    const mount = action.name === "start-upload" ? query.first("mount") : null;
    auditAction(action, mount);
    const extra = new Headers({ "Docker-Distribution-API-Version": "registry/2.0" });
    applyNsParam(reg, action, query, extra);
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
        provider: ctx.auth.identity.provider ?? null,
        client_ip: ctx.clientIp || null,
      });
    } catch (e) {
      if (!(e instanceof AuthenticationError)) throw e;
      countAuth(services.metrics, null, req.headers.get("authorization"));
      await req.body?.cancel();
      throw gate.unauthorized(action, e.message, origin);
    }
    // The namespaces listing names its repository in the query: let rules see it.
    const repo = action.name === "list-namespaces" ? query.first("repository") : null;
    const known = repo && isValidName(repo)
      ? { repository: repo }
      : JOB_ACTIONS.has(action.name)
      ? { queue: queueOf(query) }
      : {};
    // Rules that read `image` (issue 34) see the verdict of the image a read names.
    const image = IMAGE_ACTIONS.has(action.name) && services.policies.readsImage
      ? await reg.signatures.imageFacts(action.namespace!, action.reference!)
      : undefined;
    // Each tag a push by digest writes, and each image a diff reads, is decided by itself.
    for (const d of decisionsOf(action)) gate.check(ctx, d, known, image);
    if (mount !== null) {
      // Mount has its own action; the source's get-blob is checked by the mount itself.
      gate.check(ctx, { name: "mount-blob", namespace: action.namespace, digest: mount });
    }
    try {
      if (action.name === "delete-manifest" && action.digest !== undefined) {
        // A delete by digest removes the tags naming the manifest: each is decided too, read
        // only once the delete itself is allowed. The delete refuses a tag not decided here.
        const named = await reg.manifests.tagsOf(action.namespace!, action.digest);
        if (named.length > 0) action.tags = named;
        for (const d of decisionsOf(action).slice(1)) gate.check(ctx, d);
      }
      await gate.checkWebhooks(ctx, decisionsOf(action), req.headers);
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
    const scope: RequestScope = {
      req,
      url,
      query,
      action,
      head: req.method === "HEAD",
      registry: reg,
      services,
      headers: extra,
      caller: ctx,
      access: {
        canRead: (ns, digest) => gate.allows(ctx, { name: "get-blob", namespace: ns, digest }),
        canMountFrom: async (ns, digest) => {
          const read: Action = { name: "get-blob", namespace: ns, digest };
          return gate.allows(ctx, read) && await gate.webhookAllows(ctx, read, req.headers);
        },
        canListTags: (ns) => gate.allows(ctx, { name: "list-tags", namespace: ns }),
        canViewHeld: (ns, digest) => gate.grants(ctx, { name: "get-held", namespace: ns, digest }),
        unauthorized: (detail) => gate.unauthorized(action, detail, origin),
      },
      client: ctx.auth.identity.username ?? ctx.auth.identity.id ?? "anonymous",
      sent: env.completed ?? null,
    };
    return await handlerFor(action)(scope);
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
function applyNsParam(reg: Registry, a: Action, query: Query, extra: Headers): void {
  if (!PULLS.has(a.name)) return;
  const ns = query.first("ns");
  const mapped = resolveNsParam(reg.cfg, ns, a.namespace!);
  if (mapped === null) return;
  a.namespace = mapped;
  extra.set("OCI-Namespace", ns!);
}

function apiVersionHandler({ head, headers }: RequestScope): Response {
  headers.set("Content-Type", "application/json");
  return new Response(head ? null : "{}", { status: 200, headers });
}

/** The one dispatch: every action a request can parse to, to its handler. */
function handlerFor(a: Action): Handler {
  if (a.resource?.startsWith("layer-")) return layerHandler;
  if (a.resource === "progress") return jobProgressHandler;
  switch (a.name) {
    case "get-api-version":
      return apiVersionHandler;
    case "get-blob":
    case "delete-blob":
      return blobHandler;
    case "start-upload":
    case "get-upload":
    case "update-upload":
    case "complete-upload":
    case "cancel-upload":
      return uploadHandler;
    case "get-manifest":
    case "put-manifest":
    case "delete-manifest":
      return manifestHandler;
    case "list-tags":
    case "list-catalog":
    case "get-referrers":
      return listingHandler;
    case "healthz":
    case "readyz":
      return healthHandler;
    case "list-repositories":
    case "list-namespaces":
    case "list-revisions":
    case "list-uploads":
    case "ui-config":
      return svcHandler;
    case "list-jobs":
    case "list-failed-jobs":
    case "retry-job":
    case "delete-job":
      return jobsHandler;
    case "replication-status":
      return replicationStatusHandler;
    case "list-audit":
      return auditHandler;
    case "get-token":
      return tokenHandler;
    case "metrics":
      return metricsHandler;
    case "ui-asset":
      return uiHandler;
    case "get-report":
      return vulnerabilitiesHandler;
    case "diff-images":
      return diffHandler;
    case "search-files":
      return filesSearchHandler;
    case "get-signatures":
      return signaturesHandler;
    case "mount-blob":
    case "get-held":
      // authorized inside start-upload (a manifest read), never a request's own action
      throw new Error(`${a.name} is not dispatched`);
  }
}
