// `[repository."<name>"]`: per-repository policies (read by hooks.ts, rate_limit.ts, quota.ts,
// verify.ts, sync.ts), its upstreams (a pull-through cache) or downstreams (replication), and the
// namespace it serves.
import {
  type Config,
  DEFAULT_PREFETCH_MAX_BYTES,
  DOWNSTREAM_DEFAULTS,
  type DownstreamConfig,
  type ReplicationMode,
  type RepositoryConfig,
  UPSTREAM_DEFAULTS,
  type UpstreamConfig,
} from "./schema.ts";
import { isValidName } from "../oci/mod.ts";
import { readAuthWebhookRef, readRetention } from "./hooks.ts";
import { readSyncs } from "./sync.ts";
import { readRateLimit } from "./rate_limit.ts";
import { readBytes, readRepositoryQuota } from "./quota.ts";
import { readVerify } from "./verify.ts";
import { knownIdentities } from "./auth_config.ts";
import { isUrl, type Reader } from "./config_reader.ts";
import { readPolicy } from "./shared_tables.ts";
import type { Table } from "./table_readers.ts";

/** Every `[repository."<name>"]` table of `repos` into `cfg.repositories`. */
export function readRepositories(r: Reader, repos: Table, cfg: Config): void {
  const fail = r.fail.bind(r);
  const namespaces = new Map<string, string>();
  const downstreamNames = new Map<string, string>();
  for (const [name, v] of Object.entries(repos)) {
    const path = `repository."${name}"`;
    if (!isValidName(name)) r.fail(path, "not a valid repository name");
    const t = r.table(v, path);
    r.only(t, path, [
      "immutable_tags",
      "immutable_tags_exclusions",
      "namespace",
      "access_policy",
      "upstream",
      "revalidate_secs",
      "downstream",
      "authorization_webhook",
      "retention_policy",
      "sync",
      "rate_limit",
      "quota",
      "max_cache_bytes",
      "prefetch_max_bytes",
      "verify",
    ]);
    const rc: RepositoryConfig = {
      name,
      accessPolicy: readPolicy(r, t.access_policy, `${path}.access_policy`),
      immutableTags: r.bool(t, "immutable_tags", path),
      immutableTagsExclusions: r.regexes(t, "immutable_tags_exclusions", path),
      namespace: r.str(t, "namespace", path),
    };
    const hook = readAuthWebhookRef(t, path, cfg.auth.webhooks, fail);
    if (hook) rc.authorizationWebhook = hook;
    const keep = readRetention(t.retention_policy, `${path}.retention_policy`, false, fail);
    if (keep) rc.retentionPolicy = keep.policy;
    const limits = readRateLimit(
      t.rate_limit,
      `${path}.rate_limit`,
      false,
      fail,
      knownIdentities(cfg),
    );
    if (limits) rc.rateLimit = limits;
    const quota = readRepositoryQuota(t.quota, `${path}.quota`, fail);
    if (quota !== undefined) rc.quotaMaxBytes = quota;
    rc.verify = readVerify(t.verify, `${path}.verify`, fail);
    const upstreams = readUpstreams(r, t.upstream, `${path}.upstream`);
    if (upstreams.list.length > 0) {
      rc.upstreams = upstreams.list;
      rc.revalidateSecs = r.int(t, "revalidate_secs", path, 0) ?? upstreams.revalidateSecs ?? 0;
    } else if (t.revalidate_secs !== undefined) {
      r.fail(`${path}.revalidate_secs`, "only applies to a repository with upstreams");
    }
    const cap = readBytes(t, "max_cache_bytes", path, fail);
    if (cap !== undefined) {
      if (!rc.upstreams) {
        r.fail(`${path}.max_cache_bytes`, "only applies to a repository with upstreams");
      }
      rc.maxCacheBytes = cap;
    }
    const prefetch = readBytes(t, "prefetch_max_bytes", path, fail);
    if (prefetch !== undefined && !rc.upstreams) {
      r.fail(`${path}.prefetch_max_bytes`, "only applies to a repository with upstreams");
    }
    if (rc.upstreams) rc.prefetchMaxBytes = prefetch ?? DEFAULT_PREFETCH_MAX_BYTES;
    const syncs = readSyncs(t.sync, `${path}.sync`, fail);
    if (syncs.length > 0) {
      if (!rc.upstreams) r.fail(`${path}.sync`, "only applies to a repository with upstreams");
      rc.syncs = syncs;
    }
    const downstreams = readDownstreams(r, t.downstream, `${path}.downstream`, downstreamNames);
    if (downstreams.length > 0) {
      if (rc.upstreams) {
        r.fail(`${path}.downstream`, "a pull-through cache is read-only and cannot replicate");
      }
      rc.downstreams = downstreams;
    }
    if (rc.namespace !== undefined) {
      if (rc.namespace === "") r.fail(`${path}.namespace`, "must not be empty");
      const other = namespaces.get(rc.namespace);
      if (other) {
        r.fail(`${path}.namespace`, `"${rc.namespace}" is already served by repository "${other}"`);
      }
      namespaces.set(rc.namespace, name);
    }
    cfg.repositories.set(name, rc);
  }
}

const MODES: readonly ReplicationMode[] = ["event", "event+reconcile", "reconcile"];

/** `[[repository."<name>".downstream]]`; `seen` maps downstream names to their key path. */
function readDownstreams(
  r: Reader,
  v: unknown,
  path: string,
  seen: Map<string, string>,
): DownstreamConfig[] {
  if (v === undefined) return [];
  const items = Array.isArray(v) ? v : [v];
  return items.map((item, i) => {
    const p = `${path}[${i}]`;
    const t = r.table(item, p);
    r.only(t, p, [
      "name",
      ...CONNECTION_KEYS,
      "namespace_filter",
      "mode",
      "prune",
      "max_concurrent_transfers",
      "reconcile_interval_secs",
      "upload_hosts",
    ]);
    const connection = readConnection(r, t, p);
    const uploadHosts = (r.strings(t, "upload_hosts", p) ?? []).map((h, i) => {
      // An origin, as the upload Location is compared by origin.
      const u = isUrl(h) ? new URL(h) : null;
      if (!u || u.pathname !== "/" || u.search || u.hash || u.username || u.password) {
        r.fail(`${p}.upload_hosts[${i}]`, `"${h}" must be an origin: http(s)://host[:port]`);
      }
      return u.origin;
    });
    const name = r.str(t, "name", p);
    if (!name) r.fail(`${p}.name`, "is required");
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name!)) {
      r.fail(`${p}.name`, "must be 1-64 letters, digits, '.', '_' or '-'");
    }
    const other = seen.get(name!);
    if (other) r.fail(`${p}.name`, `"${name}" is already the name of ${other}`);
    seen.set(name!, p);
    const mode = r.str(t, "mode", p) ?? DOWNSTREAM_DEFAULTS.mode;
    if (!MODES.includes(mode as ReplicationMode)) {
      r.fail(`${p}.mode`, `must be one of ${MODES.join(", ")}`);
    }
    return {
      ...connection,
      name: name!,
      namespaceFilter: r.regexes(t, "namespace_filter", p) ?? [],
      mode: mode as ReplicationMode,
      prune: r.bool(t, "prune", p) ?? DOWNSTREAM_DEFAULTS.prune,
      maxConcurrentTransfers: r.int(t, "max_concurrent_transfers", p, 1, 64) ??
        DOWNSTREAM_DEFAULTS.maxConcurrentTransfers,
      reconcileIntervalSecs: r.int(t, "reconcile_interval_secs", p, 1) ??
        DOWNSTREAM_DEFAULTS.reconcileIntervalSecs,
      uploadHosts,
    };
  });
}

/** `[[repository."<name>".upstream]]`: a list of tables (a single table is taken as one). */
function readUpstreams(
  r: Reader,
  v: unknown,
  path: string,
): { list: UpstreamConfig[]; revalidateSecs?: number } {
  if (v === undefined) return { list: [] };
  const items = Array.isArray(v) ? v : [v];
  let revalidateSecs: number | undefined;
  const list = items.map((item, i) => {
    const p = `${path}[${i}]`;
    const t = r.table(item, p);
    r.only(t, p, [...CONNECTION_KEYS, "revalidate_secs"]);
    revalidateSecs ??= r.int(t, "revalidate_secs", p, 0);
    return readConnection(r, t, p);
  });
  return { list, revalidateSecs };
}

/** The keys readConnection reads, which every upstream and downstream table allows. */
const CONNECTION_KEYS = [
  "url",
  "username",
  "password",
  "ca_bundle",
  "connect_timeout_secs",
  "read_timeout_secs",
  "max_redirects",
];

/** url, credentials, ca_bundle and timeouts of an upstream or downstream table. */
function readConnection(r: Reader, t: Table, p: string): UpstreamConfig {
  const url = r.str(t, "url", p);
  if (!url || !isUrl(url)) r.fail(`${p}.url`, "must be an http(s) URL");
  const u = new URL(url!);
  if (u.search || u.hash || u.username || u.password) {
    r.fail(`${p}.url`, "must not carry a query, fragment or credentials");
  }
  const username = r.str(t, "username", p) ?? null;
  const password = r.str(t, "password", p) ?? null;
  if ((username === null) !== (password === null)) {
    r.fail(
      `${p}.${username === null ? "username" : "password"}`,
      "username and password go together",
    );
  }
  return {
    url: url!.replace(/\/+$/, ""),
    username,
    password,
    caBundle: r.str(t, "ca_bundle", p) ?? null,
    connectTimeoutSecs: r.int(t, "connect_timeout_secs", p, 1, 3600) ??
      UPSTREAM_DEFAULTS.connectTimeoutSecs,
    readTimeoutSecs: r.int(t, "read_timeout_secs", p, 1, 86400) ??
      UPSTREAM_DEFAULTS.readTimeoutSecs,
    maxRedirects: r.int(t, "max_redirects", p, 0, 20) ?? UPSTREAM_DEFAULTS.maxRedirects,
  };
}
