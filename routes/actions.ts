// Maps a request to its named action (the unit the access policy authorizes). Pure: method +
// path in, Action or null out. Names may contain `blobs`, `manifests`, `tags`: every pattern
// anchors its fixed tail, and the name is whatever precedes it.
import { MAX_TAGS_PER_PUSH } from "../lib/registry/mod.ts";
import {
  isValidName,
  isValidTag,
  isValidUuid,
  methodNotAllowed,
  methodUnsupported,
  parseDigest,
  RegistryError,
  truncate,
} from "../lib/oci/mod.ts";

export type ActionName =
  | "get-api-version"
  | "get-blob"
  | "delete-blob"
  | "start-upload"
  | "get-upload"
  | "update-upload"
  | "complete-upload"
  | "cancel-upload"
  | "get-manifest"
  | "put-manifest"
  | "delete-manifest"
  | "list-tags"
  | "list-catalog"
  | "get-referrers"
  | "mount-blob"
  | "healthz"
  | "readyz"
  | "get-token"
  | "metrics"
  | "list-repositories"
  | "list-namespaces"
  | "list-revisions"
  | "list-uploads"
  | "ui-config"
  | "ui-asset"
  | "list-jobs"
  | "list-failed-jobs"
  | "retry-job"
  | "delete-job"
  | "get-report"
  | "diff-images"
  | "search-files"
  | "replication-status"
  | "list-audit"
  | "get-signatures"
  | "get-held";

export interface Action {
  name: ActionName;
  namespace?: string;
  digest?: string;
  reference?: string;
  tag?: string;
  /**
   * Tags the request writes besides its path's: those a push by digest creates (its `tag`
   * parameters, SPEC §Manifests rule 7) or a delete by digest removes. Each is authorized as
   * the action with that `tag` (authorize.ts decisionsOf).
   */
  tags?: string[];
  /**
   * The images a diff reads by its query (`from` and `to`): each is authorized as the action
   * with that reference (authorize.ts decisionsOf), as a report of a tag sees its `tag`.
   */
  compared?: string[];
  uuid?: string;
  /** which extension listing a shared action serves (the pulls listing is `list-revisions`) */
  resource?:
    | "pulls"
    | "pending"
    | "failed"
    | "layer-entries"
    | "layer-file"
    | "layer-details"
    | "vulnerabilities"
    | "diff"
    | "configured"
    | "progress";
}

type Method = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";

interface Route {
  re: RegExp;
  methods: Partial<Record<Method, ActionName>>;
  resource?: Action["resource"];
}

const READ = (name: ActionName) => ({ GET: name, HEAD: name });

const ROUTES: Route[] = [
  { re: /^\/v2\/?$/, methods: { GET: "get-api-version", HEAD: "get-api-version" } },
  { re: /^\/v2\/_catalog$/, methods: { GET: "list-catalog", HEAD: "list-catalog" } },
  // Extension listings (SPEC §Extension endpoints). `_svc` cannot start a name component, so
  // these never shadow a namespace; names merely containing `_svc` still parse.
  { re: /^\/v2\/_svc\/repositories\/list$/, methods: READ("list-repositories") },
  // Configured repositories, held or not (the listing above leaves out those holding nothing).
  {
    re: /^\/v2\/_svc\/repositories\/configured$/,
    methods: READ("list-repositories"),
    resource: "configured",
  },
  { re: /^\/v2\/_svc\/namespaces\/list$/, methods: READ("list-namespaces") },
  { re: /^\/v2\/_svc\/ui\/config$/, methods: READ("ui-config") },
  { re: /^\/v2\/_svc\/files\/search$/, methods: READ("search-files") },
  { re: /^\/v2\/_svc\/replication\/status$/, methods: READ("replication-status") },
  { re: /^\/v2\/_svc\/audit$/, methods: READ("list-audit") },
  { re: /^\/v2\/_svc\/jobs\/list$/, methods: READ("list-jobs"), resource: "pending" },
  // Long runs' progress (a reindex, a rescan, a sync run): read as the jobs listing is.
  { re: /^\/v2\/_svc\/jobs\/progress$/, methods: READ("list-jobs"), resource: "progress" },
  {
    re: /^\/v2\/_svc\/jobs\/failed$/,
    methods: { ...READ("list-failed-jobs"), POST: "retry-job", DELETE: "delete-job" },
    resource: "failed",
  },
  { re: /^\/v2\/_svc\/jobs\/pending$/, methods: { DELETE: "delete-job" }, resource: "pending" },
  { re: /^\/v2\/(.+)\/_svc\/revisions\/list$/, methods: READ("list-revisions") },
  { re: /^\/v2\/(.+)\/_svc\/pulls\/list$/, methods: READ("list-revisions"), resource: "pulls" },
  { re: /^\/v2\/(.+)\/_svc\/uploads\/list$/, methods: READ("list-uploads") },
  // Layer browsing is gated by get-blob on the layer's namespace (SPEC, after Layer file 7).
  {
    re: /^\/v2\/(.+)\/_svc\/layers\/([^/]+)\/entries$/,
    methods: READ("get-blob"),
    resource: "layer-entries",
  },
  {
    re: /^\/v2\/(.+)\/_svc\/layers\/([^/]+)\/file$/,
    methods: READ("get-blob"),
    resource: "layer-file",
  },
  {
    re: /^\/v2\/(.+)\/_svc\/layers\/([^/]+)\/details$/,
    methods: READ("get-blob"),
    resource: "layer-details",
  },
  { re: /^\/v2\/(.+)\/_svc\/diff$/, methods: READ("diff-images"), resource: "diff" },
  // Who signed an image, with which key or identity, verified when, why not (issue 34).
  { re: /^\/v2\/(.+)\/_svc\/signatures\/([^/]+)$/, methods: READ("get-signatures") },
  {
    re: /^\/v2\/(.+)\/_svc\/vulnerabilities\/([^/]+)$/,
    methods: READ("get-report"),
    resource: "vulnerabilities",
  },
  { re: /^\/v2\/(.+)\/blobs\/uploads\/?$/, methods: { POST: "start-upload" } },
  {
    re: /^\/v2\/(.+)\/blobs\/uploads\/([^/]+)$/,
    methods: {
      GET: "get-upload",
      PATCH: "update-upload",
      PUT: "complete-upload",
      DELETE: "cancel-upload",
    },
  },
  {
    re: /^\/v2\/(.+)\/blobs\/([^/]+)$/,
    methods: { GET: "get-blob", HEAD: "get-blob", DELETE: "delete-blob" },
  },
  {
    re: /^\/v2\/(.+)\/manifests\/([^/]+)$/,
    methods: {
      GET: "get-manifest",
      HEAD: "get-manifest",
      PUT: "put-manifest",
      DELETE: "delete-manifest",
    },
  },
  { re: /^\/v2\/(.+)\/tags\/list$/, methods: { GET: "list-tags", HEAD: "list-tags" } },
  {
    re: /^\/v2\/(.+)\/referrers\/([^/]+)$/,
    methods: { GET: "get-referrers", HEAD: "get-referrers" },
  },
  { re: /^\/healthz$/, methods: { GET: "healthz", HEAD: "healthz" } },
  { re: /^\/readyz$/, methods: { GET: "readyz", HEAD: "readyz" } },
  { re: /^\/metrics$/, methods: { GET: "metrics", HEAD: "metrics" } },
  { re: /^\/token$/, methods: { GET: "get-token" } },
];

/**
 * Returns the action of a request, null when no route matches (→ 404 for GET/HEAD, 400
 * otherwise), or throws a RegistryError for a matched route with a malformed name or digest.
 */
/**
 * A digest, tag or session id as the client sent it: percent-decoded (`sha256%3A…` is a digest,
 * as docker-registry reads it, which matches routes on the decoded path); a malformed escape is
 * left as written and then fails the grammar like any other bad value.
 */
function decodeSegment(s: string): string {
  if (!s || !s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function parseAction(method: string, path: string): Action | null {
  for (const r of ROUTES) {
    const m = r.re.exec(path);
    if (!m) continue;
    const name = r.methods[method as Method];
    if (!name) {
      // SPEC pairs UNSUPPORTED with 400; only /token names a 405 (the OAuth 2.0 POST form).
      // Allow still tells the client what would work.
      const detail = `method ${truncate(method)} not allowed on this path`;
      const allow = Object.keys(r.methods);
      throw path === "/token" ? methodNotAllowed(detail, allow) : methodUnsupported(detail, allow);
    }
    const action: Action = { name };
    if (r.resource) action.resource = r.resource;
    if (m[1] !== undefined && path.startsWith("/v2/")) {
      if (!isValidName(m[1])) {
        throw new RegistryError("NAME_INVALID", `invalid repository name: ${truncate(m[1])}`);
      }
      action.namespace = m[1];
    }
    const arg = decodeSegment(m[2]);
    switch (name) {
      case "get-blob":
      case "delete-blob":
      case "get-report":
      case "get-referrers": {
        const d = parseDigest(arg);
        // An image report takes a tag too, as the image diff does.
        const tag = !d && name === "get-report" && !arg.includes(":") && isValidTag(arg);
        if (!d && !tag && name !== "get-referrers") {
          throw new RegistryError("DIGEST_INVALID", `invalid digest: ${truncate(arg)}`);
        }
        if (d) action.digest = d.value;
        else action.reference = arg; // referrers answers DIGEST_INVALID itself, after auth
        if (tag) action.tag = arg;
        break;
      }
      case "get-upload":
      case "update-upload":
      case "complete-upload":
      case "cancel-upload":
        if (!isValidUuid(arg)) {
          throw new RegistryError("BLOB_UPLOAD_UNKNOWN", `invalid upload id: ${truncate(arg)}`);
        }
        action.uuid = arg;
        break;
      case "get-manifest":
      case "put-manifest":
      case "delete-manifest":
      case "get-signatures":
        action.reference = arg;
        if (arg.includes(":")) {
          const d = parseDigest(arg);
          if (!d) throw new RegistryError("DIGEST_INVALID", `invalid digest: ${truncate(arg)}`);
          action.digest = d.value;
        } else {
          action.tag = arg;
        }
        break;
    }
    return action;
  }
  return null;
}

/**
 * The `tag` parameters of a push by digest (SPEC §Manifests rule 7), read at routing so that
 * authorization sees each: a value that is not a tag is a 400 there, repeats count once, and
 * more than one push may write (MAX_TAGS_PER_PUSH) is refused before any is decided. A push by
 * tag ignores them.
 */
export function pushTags(a: Action, values: string[]): string[] | undefined {
  if (a.name !== "put-manifest" || a.digest === undefined || values.length === 0) return undefined;
  const tags = [...new Set(values)];
  for (const t of tags) {
    if (!isValidTag(t)) {
      throw new RegistryError("UNSUPPORTED", `invalid tag parameter ${truncate(t)}`);
    }
  }
  if (tags.length > MAX_TAGS_PER_PUSH) {
    throw new RegistryError("UNSUPPORTED", `at most ${MAX_TAGS_PER_PUSH} tag parameters`);
  }
  return tags;
}

/**
 * The references a diff compares (`from`, `to`), for authorization; undefined when the query
 * is malformed, which the diff refuses (404) once authorized as itself.
 */
export function comparedRefs(a: Action, from: string[], to: string[]): string[] | undefined {
  if (a.name !== "diff-images" || from.length !== 1 || to.length !== 1) return undefined;
  const refs = [...new Set([from[0], to[0]])];
  const valid = (r: string) => (r.includes(":") ? parseDigest(r) !== null : isValidTag(r));
  return refs.every(valid) ? refs : undefined;
}
