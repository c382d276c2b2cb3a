// Reads TOML files (later files win, key by key) and validates them into a Config.
// Every problem fails startup with the file and the dotted key path.
import { parse as parseToml } from "smol-toml";
import {
  type Config,
  DEFAULT_PREFETCH_MAX_BYTES,
  defaultConfig,
  DOWNSTREAM_DEFAULTS,
  type DownstreamConfig,
  type IndexConfig,
  isEcosystemName,
  JOB_QUEUES,
  type JobQueueConfig,
  type PolicyConfig,
  type ReplicationMode,
  type RepositoryConfig,
  type S3StoreConfig,
  type SandboxBudget,
  type SandboxMode,
  type TlsConfig,
  UPSTREAM_DEFAULTS,
  type UpstreamConfig,
} from "./schema.ts";
import { isValidName } from "../oci/mod.ts";
import { readAuthWebhookRef, readAuthWebhooks, readEventWebhooks, readRetention } from "./hooks.ts";
import { readSyncs } from "./sync.ts";
import { readRateLimit } from "./rate_limit.ts";
import type { KnownIdentities } from "./identity_refs.ts";
import { readBytes, readGlobalQuota, readRepositoryQuota } from "./quota.ts";
import { withListenOverrides } from "./listen_given.ts";
import { readVerify, type VerifyConfig } from "./verify.ts";

export class ConfigError extends Error {}

type Table = Record<string, unknown>;

const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** Deep-merges `b` over `a`; tables merge, every other value is replaced. */
function merge(a: Table, b: Table): Table {
  const out: Table = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] = isTable(v) && isTable(out[k]) ? merge(out[k] as Table, v) : v;
  }
  return out;
}

export async function loadConfigFiles(paths: string[]): Promise<Config> {
  let doc: Table = {};
  for (const p of paths) {
    let text: string;
    try {
      text = await Deno.readTextFile(p);
    } catch (e) {
      throw new ConfigError(`config ${p}: cannot read: ${(e as Error).message}`);
    }
    try {
      doc = merge(doc, parseToml(text) as Table);
    } catch (e) {
      throw new ConfigError(`config ${p}: invalid TOML: ${(e as Error).message}`);
    }
  }
  // serve's --port/--bind and WHARF_PORT/WHARF_BIND outrank every file (listen.ts).
  return withListenOverrides(buildConfig(doc, paths));
}

/**
 * A `[verify]` table (as `[repository."<name>".verify]` holds it) validated into a VerifyConfig;
 * throws ConfigError naming the key (`path` prefixes it) on a malformed key, root or pattern.
 */
export function parseVerifyConfig(table: unknown, path = "verify"): VerifyConfig {
  const v = readVerify(table ?? {}, path, (key, msg) => {
    throw new ConfigError(`${key}: ${msg}`);
  });
  return v!;
}

class Reader {
  constructor(private readonly files: string) {}
  fail(key: string, msg: string): never {
    throw new ConfigError(`config ${this.files}: ${key}: ${msg}`);
  }
  table(v: unknown, key: string): Table {
    if (v === undefined) return {};
    if (!isTable(v)) this.fail(key, "must be a table");
    return v;
  }
  only(t: Table, key: string, allowed: string[]) {
    for (const k of Object.keys(t)) {
      if (!allowed.includes(k)) this.fail(key ? `${key}.${k}` : k, "unknown key");
    }
  }
  str(t: Table, key: string, path: string): string | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "string") this.fail(`${path}.${key}`, "must be a string");
    return v;
  }
  bool(t: Table, key: string, path: string): boolean | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") this.fail(`${path}.${key}`, "must be true or false");
    return v;
  }
  int(
    t: Table,
    key: string,
    path: string,
    min: number,
    max = Number.MAX_SAFE_INTEGER,
  ): number | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    const n = typeof v === "bigint" ? Number(v) : v;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max) {
      this.fail(`${path}.${key}`, `must be an integer from ${min} to ${max}`);
    }
    return n;
  }
  strings(t: Table, key: string, path: string): string[] | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      this.fail(`${path}.${key}`, "must be an array of strings");
    }
    return v as string[];
  }
  /** a string or an array of strings, as a list */
  stringOrList(t: Table, key: string, path: string): string[] | undefined {
    const v = t[key];
    if (typeof v === "string") return [v];
    return this.strings(t, key, path);
  }
  regexes(t: Table, key: string, path: string): RegExp[] | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      this.fail(`${path}.${key}`, "must be an array of strings");
    }
    return (v as string[]).map((s, i) => {
      try {
        // Exclusions are full-match: anchor them so `latest` does not match `latest-rc`.
        return new RegExp(`^(?:${s})$`);
      } catch (e) {
        this.fail(`${path}.${key}[${i}]`, `invalid regex: ${(e as Error).message}`);
      }
    });
  }
}

export function buildConfig(doc: Table, paths: string[]): Config {
  const r = new Reader(paths.join(", ") || "(embedded default)");
  const cfg = defaultConfig();
  cfg.sources = paths;
  r.only(doc, "", [
    "server",
    "blob_store",
    "metadata_store",
    "global",
    "repository",
    "auth",
    "ui",
    "scan",
    "event_webhook",
  ]);

  const server = r.table(doc.server, "server");
  r.only(server, "server", ["bind_address", "port", "tls", "trusted_proxies"]);
  cfg.server.bindAddress = r.str(server, "bind_address", "server") ?? cfg.server.bindAddress;
  cfg.server.port = r.int(server, "port", "server", 0, 65535) ?? cfg.server.port;
  cfg.server.trustedProxies = r.strings(server, "trusted_proxies", "server") ?? [];
  for (const [i, p] of cfg.server.trustedProxies.entries()) {
    if (!isIpOrCidr(p)) {
      r.fail(`server.trusted_proxies[${i}]`, `"${p}" is not an IP address or CIDR`);
    }
  }
  if (server.tls !== undefined) cfg.server.tls = readTls(r, r.table(server.tls, "server.tls"));
  readAuth(r, r.table(doc.auth, "auth"), cfg);

  const bs = r.table(doc.blob_store, "blob_store");
  r.only(bs, "blob_store", ["fs", "s3", "min_free_bytes"]);
  cfg.blobStore.minFreeBytes = r.int(bs, "min_free_bytes", "blob_store", 0) ?? null;
  const fs = r.table(bs.fs, "blob_store.fs");
  r.only(fs, "blob_store.fs", ["root_dir"]);
  cfg.blobStore.fs.rootDir = r.str(fs, "root_dir", "blob_store.fs") ?? cfg.blobStore.fs.rootDir;
  if (bs.s3 !== undefined) {
    if (bs.fs !== undefined) r.fail("blob_store", "set one of [blob_store.fs] and [blob_store.s3]");
    cfg.blobStore.s3 = readS3(r, r.table(bs.s3, "blob_store.s3"));
  }

  const md = r.table(doc.metadata_store, "metadata_store");
  r.only(md, "metadata_store", ["path", "url"]);
  cfg.metadataStore.path = r.str(md, "path", "metadata_store") ?? cfg.metadataStore.path;
  cfg.metadataStore.url = r.str(md, "url", "metadata_store") ?? null;
  if (cfg.metadataStore.url !== null) {
    if (md.path !== undefined) r.fail("metadata_store", "set one of path and url");
    if (!isUrl(cfg.metadataStore.url)) {
      r.fail("metadata_store.url", "must be an http(s) KV Connect URL");
    }
  }

  const g = r.table(doc.global, "global");
  r.only(g, "global", [
    "max_blob_size",
    "max_manifest_size",
    "allow_missing_manifest_references",
    "immutable_tags",
    "immutable_tags_exclusions",
    "access_policy",
    "update_pull_time",
    "max_pulls",
    "max_age_secs",
    "listing_read_concurrency",
    "upload_timeout_secs",
    "enable_blob_redirect",
    "enable_manifest_redirect",
    "outbound_allow",
    "scrub",
    "integrity",
    "job_queue",
    "index",
    "authorization_webhook",
    "retention_policy",
    "audit",
    "rate_limit",
    "quota",
  ]);
  cfg.global.maxBlobSize = r.int(g, "max_blob_size", "global", 1) ?? null;
  cfg.global.maxManifestSize = r.int(g, "max_manifest_size", "global", 1, 64 * 1024 * 1024) ??
    cfg.global.maxManifestSize;
  cfg.global.allowMissingManifestReferences =
    r.bool(g, "allow_missing_manifest_references", "global") ??
      cfg.global.allowMissingManifestReferences;
  cfg.global.immutableTags = r.bool(g, "immutable_tags", "global") ?? false;
  cfg.global.immutableTagsExclusions = r.regexes(g, "immutable_tags_exclusions", "global") ?? [];
  cfg.global.accessPolicy = readPolicy(r, g.access_policy, "global.access_policy") ??
    cfg.global.accessPolicy;
  cfg.global.updatePullTime = r.bool(g, "update_pull_time", "global") ?? false;
  cfg.global.maxPulls = r.int(g, "max_pulls", "global", 1) ?? cfg.global.maxPulls;
  cfg.global.maxAgeSecs = r.int(g, "max_age_secs", "global", 1) ?? null;
  cfg.global.listingReadConcurrency = r.int(g, "listing_read_concurrency", "global", 1, 1024) ??
    cfg.global.listingReadConcurrency;
  cfg.global.uploadTimeoutSecs = r.int(g, "upload_timeout_secs", "global", 1) ??
    cfg.global.uploadTimeoutSecs;
  cfg.global.enableBlobRedirect = r.bool(g, "enable_blob_redirect", "global") ?? true;
  cfg.global.enableManifestRedirect = r.bool(g, "enable_manifest_redirect", "global") ?? true;
  cfg.global.outboundAllow = r.strings(g, "outbound_allow", "global") ?? [];
  for (const [i, a] of cfg.global.outboundAllow.entries()) {
    if (!isIpOrCidr(a)) {
      r.fail(`global.outbound_allow[${i}]`, `"${a}" is not an IP address or CIDR`);
    }
  }
  const scrub = r.table(g.scrub, "global.scrub");
  r.only(scrub, "global.scrub", ["interval_secs", "grace_secs"]);
  cfg.global.scrub.intervalSecs = r.int(scrub, "interval_secs", "global.scrub", 1) ?? null;
  cfg.global.scrub.graceSecs = r.int(scrub, "grace_secs", "global.scrub", 0) ??
    cfg.global.scrub.graceSecs;
  const integrity = r.table(g.integrity, "global.integrity");
  r.only(integrity, "global.integrity", ["interval_secs", "bytes_per_sec"]);
  cfg.global.integrity.intervalSecs = r.int(integrity, "interval_secs", "global.integrity", 1) ??
    null;
  cfg.global.integrity.bytesPerSec = r.int(integrity, "bytes_per_sec", "global.integrity", 1) ??
    cfg.global.integrity.bytesPerSec;
  const audit = r.table(g.audit, "global.audit");
  r.only(audit, "global.audit", ["enabled", "max_age_days", "max_denials_per_minute"]);
  cfg.global.audit.enabled = r.bool(audit, "enabled", "global.audit") ?? false;
  cfg.global.audit.maxAgeDays = r.int(audit, "max_age_days", "global.audit", 1, 36500) ?? null;
  cfg.global.audit.maxDenialsPerMinute =
    r.int(audit, "max_denials_per_minute", "global.audit", 0, 100_000) ??
      cfg.global.audit.maxDenialsPerMinute;
  readJobQueue(r, r.table(g.job_queue, "global.job_queue"), cfg.global.jobQueue);
  const ix = r.table(g.index, "global.index");
  r.only(ix, "global.index", [
    "on_push",
    "max_layer_size",
    "max_uncompressed_size",
    "max_entries",
    "max_uncompressed_ratio",
    "max_path_bytes",
    "max_secret_scan_bytes",
    ...SANDBOX_KEYS,
  ]);
  const onPush = r.str(ix, "on_push", "global.index") ?? cfg.global.index.onPush;
  if (!["hosted", "all", "none"].includes(onPush)) {
    r.fail("global.index.on_push", "must be one of hosted, all, none");
  }
  cfg.global.index.onPush = onPush as IndexConfig["onPush"];
  cfg.global.index.maxLayerSize = r.int(ix, "max_layer_size", "global.index", 1) ??
    cfg.global.index.maxLayerSize;
  cfg.global.index.maxUncompressedSize = r.int(ix, "max_uncompressed_size", "global.index", 1) ??
    cfg.global.index.maxUncompressedSize;
  cfg.global.index.maxEntries = r.int(ix, "max_entries", "global.index", 1) ??
    cfg.global.index.maxEntries;
  cfg.global.index.maxUncompressedRatio = r.int(ix, "max_uncompressed_ratio", "global.index", 1) ??
    cfg.global.index.maxUncompressedRatio;
  cfg.global.index.maxPathBytes = r.int(ix, "max_path_bytes", "global.index", 256) ??
    cfg.global.index.maxPathBytes;
  cfg.global.index.maxSecretScanBytes = r.int(ix, "max_secret_scan_bytes", "global.index", 0) ??
    cfg.global.index.maxSecretScanBytes;
  readSandbox(r, ix, "global.index", cfg.global.index);
  const fail = r.fail.bind(r);
  cfg.eventWebhooks = readEventWebhooks(doc.event_webhook, fail);
  cfg.global.authorizationWebhook = readAuthWebhookRef(g, "global", cfg.auth.webhooks, fail) ??
    null;
  const retention = readRetention(g.retention_policy, "global.retention_policy", true, fail);
  cfg.global.retentionPolicy = retention?.policy ?? null;
  if (retention) cfg.global.retentionSchedule = retention.schedule;
  cfg.global.rateLimit = readRateLimit(
    g.rate_limit,
    "global.rate_limit",
    true,
    fail,
    knownIdentities(cfg),
  );
  cfg.global.quota = readGlobalQuota(g.quota, "global.quota", fail);
  readUi(r, r.table(doc.ui, "ui"), cfg);
  const sc = r.table(doc.scan, "scan");
  r.only(sc, "scan", [
    "advisories_dir",
    "on_push",
    "reload_interval_secs",
    "advisories_url",
    "refresh_interval_secs",
    "advisories_ecosystems",
    "advisories_ca_bundle",
    "max_database_size",
    "max_packages",
    "max_diff_entries",
    ...SANDBOX_KEYS,
  ]);
  cfg.scan.advisoriesDir = r.str(sc, "advisories_dir", "scan") ?? null;
  cfg.scan.onPush = r.bool(sc, "on_push", "scan") ?? cfg.scan.onPush;
  cfg.scan.reloadIntervalSecs = r.int(sc, "reload_interval_secs", "scan", 1) ??
    cfg.scan.reloadIntervalSecs;
  cfg.scan.advisoriesUrl = r.str(sc, "advisories_url", "scan") ?? cfg.scan.advisoriesUrl;
  if (cfg.scan.advisoriesUrl !== "" && !isUrl(cfg.scan.advisoriesUrl)) {
    r.fail("scan.advisories_url", 'must be an http(s) URL, or "" to never download');
  }
  cfg.scan.refreshIntervalSecs = r.int(sc, "refresh_interval_secs", "scan", 1) ?? null;
  if (cfg.scan.refreshIntervalSecs !== null && !cfg.scan.advisoriesDir) {
    r.fail("scan.refresh_interval_secs", "needs scan.advisories_dir (where the files go)");
  }
  cfg.scan.advisoriesEcosystems = r.strings(sc, "advisories_ecosystems", "scan") ?? [];
  for (const [i, e] of cfg.scan.advisoriesEcosystems.entries()) {
    if (!isEcosystemName(e)) {
      r.fail(`scan.advisories_ecosystems[${i}]`, `"${e}" is not an OSV ecosystem name`);
    }
  }
  cfg.scan.advisoriesCaBundle = r.str(sc, "advisories_ca_bundle", "scan") ?? null;
  cfg.scan.maxDatabaseSize = r.int(sc, "max_database_size", "scan", 1) ??
    cfg.scan.maxDatabaseSize;
  cfg.scan.maxPackages = r.int(sc, "max_packages", "scan", 1) ?? cfg.scan.maxPackages;
  cfg.scan.maxDiffEntries = r.int(sc, "max_diff_entries", "scan", 1) ?? cfg.scan.maxDiffEntries;
  readSandbox(r, sc, "scan", cfg.scan);

  const repos = r.table(doc.repository, "repository");
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
  // The outbound clients see only their own section; the allow list rides along with it.
  const allow = cfg.global.outboundAllow;
  for (const rc of allow.length > 0 ? cfg.repositories.values() : []) {
    for (const u of [...rc.upstreams ?? [], ...rc.downstreams ?? []]) u.outboundAllow = allow;
  }
  for (const p of allow.length > 0 ? cfg.auth.oidc.values() : []) p.outboundAllow = allow;
  return cfg;
}

const SANDBOX_KEYS = ["sandbox", "max_wall_secs", "max_cpu_secs", "max_memory_bytes"] as const;

/** The sandbox mode and budget keys `[global.index]` and `[scan]` share. */
function readSandbox(
  r: Reader,
  t: Table,
  path: string,
  out: { sandbox: SandboxMode; budget: SandboxBudget },
): void {
  const mode = r.str(t, "sandbox", path) ?? out.sandbox;
  if (!["process", "worker", "off"].includes(mode)) {
    r.fail(`${path}.sandbox`, "must be one of process, worker, off");
  }
  out.sandbox = mode as SandboxMode;
  out.budget = {
    wallSecs: r.int(t, "max_wall_secs", path, 1) ?? out.budget.wallSecs,
    cpuSecs: r.int(t, "max_cpu_secs", path, 1) ?? out.budget.cpuSecs,
    memoryBytes: r.int(t, "max_memory_bytes", path, 64 * 1024 * 1024) ?? out.budget.memoryBytes,
  };
}

function readJobQueue(r: Reader, t: Table, out: JobQueueConfig): void {
  const path = "global.job_queue";
  r.only(t, path, [
    "max_attempts",
    "backoff_min_ms",
    "backoff_max_ms",
    "lease_secs",
    "poll_interval_ms",
    "concurrency",
  ]);
  out.maxAttempts = r.int(t, "max_attempts", path, 1, 1000) ?? out.maxAttempts;
  out.backoffMinMs = r.int(t, "backoff_min_ms", path, 1, 86_400_000) ?? out.backoffMinMs;
  out.backoffMaxMs = r.int(t, "backoff_max_ms", path, 1, 86_400_000) ?? out.backoffMaxMs;
  if (out.backoffMaxMs < out.backoffMinMs) {
    r.fail(`${path}.backoff_max_ms`, "must not be below backoff_min_ms");
  }
  out.leaseSecs = r.int(t, "lease_secs", path, 1, 3600) ?? out.leaseSecs;
  out.pollIntervalMs = r.int(t, "poll_interval_ms", path, 10, 600_000) ?? out.pollIntervalMs;
  const c = r.table(t.concurrency, `${path}.concurrency`);
  r.only(c, `${path}.concurrency`, [...JOB_QUEUES]);
  for (const q of JOB_QUEUES) {
    out.concurrency[q] = r.int(c, q, `${path}.concurrency`, 0, 256) ?? out.concurrency[q];
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
      "url",
      "username",
      "password",
      "ca_bundle",
      "connect_timeout_secs",
      "read_timeout_secs",
      "max_redirects",
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
    r.only(t, p, [
      "url",
      "username",
      "password",
      "ca_bundle",
      "connect_timeout_secs",
      "read_timeout_secs",
      "max_redirects",
      "revalidate_secs",
    ]);
    revalidateSecs ??= r.int(t, "revalidate_secs", p, 0);
    return readConnection(r, t, p);
  });
  return { list, revalidateSecs };
}

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

function readUi(r: Reader, ui: Table, cfg: Config): void {
  r.only(ui, "ui", ["enabled", "name", "oidc"]);
  cfg.ui.enabled = r.bool(ui, "enabled", "ui") ?? false;
  cfg.ui.name = r.str(ui, "name", "ui") ?? cfg.ui.name;
  if (ui.oidc === undefined) return;
  const o = r.table(ui.oidc, "ui.oidc");
  r.only(o, "ui.oidc", ["provider", "client_id", "scopes"]);
  const provider = r.str(o, "provider", "ui.oidc");
  const clientId = r.str(o, "client_id", "ui.oidc");
  if (!provider) r.fail("ui.oidc.provider", "is required");
  if (!clientId) r.fail("ui.oidc.client_id", "is required");
  if (!cfg.auth.oidc.has(provider!)) {
    r.fail("ui.oidc.provider", `"${provider}" is not a configured [auth.oidc.<name>] provider`);
  }
  cfg.ui.oidc = {
    provider: provider!,
    clientId: clientId!,
    scopes: r.str(o, "scopes", "ui.oidc") ?? "openid profile email",
  };
}

function readPolicy(r: Reader, v: unknown, path: string): PolicyConfig | undefined {
  if (v === undefined) return undefined;
  const t = r.table(v, path);
  r.only(t, path, ["default", "rules"]);
  const def = r.str(t, "default", path) ?? "allow";
  if (def !== "allow" && def !== "deny") r.fail(`${path}.default`, `must be "allow" or "deny"`);
  return { default: def, rules: r.strings(t, "rules", path) ?? [] };
}

function readTls(r: Reader, t: Table): TlsConfig {
  const path = "server.tls";
  r.only(t, path, [
    "server_certificate_bundle",
    "server_private_key",
    "client_ca_bundle",
    "client_auth",
  ]);
  const cert = r.str(t, "server_certificate_bundle", path);
  const key = r.str(t, "server_private_key", path);
  if (!cert) r.fail(`${path}.server_certificate_bundle`, "is required with [server.tls]");
  if (!key) r.fail(`${path}.server_private_key`, "is required with [server.tls]");
  const ca = r.str(t, "client_ca_bundle", path) ?? null;
  const mode = r.str(t, "client_auth", path) ?? (ca ? "optional" : "none");
  if (mode !== "none" && mode !== "optional" && mode !== "required") {
    r.fail(`${path}.client_auth`, `must be "optional" or "required"`);
  }
  if (mode !== "none" && !ca) {
    r.fail(`${path}.client_ca_bundle`, `is required with client_auth = "${mode}"`);
  }
  return {
    serverCertificateBundle: cert,
    serverPrivateKey: key,
    clientCaBundle: ca,
    clientAuth: mode,
  };
}

function readAuth(r: Reader, auth: Table, cfg: Config): void {
  r.only(auth, "auth", ["identity", "oidc", "token_service", "webhook"]);
  cfg.auth.webhooks = readAuthWebhooks(auth.webhook, r.fail.bind(r));
  const usernames = new Set<string>();
  for (const [id, v] of Object.entries(r.table(auth.identity, "auth.identity"))) {
    const path = `auth.identity.${id}`;
    const t = r.table(v, path);
    r.only(t, path, ["username", "password"]);
    const username = r.str(t, "username", path);
    const password = r.str(t, "password", path);
    if (!username) r.fail(`${path}.username`, "is required");
    if (username.includes(":")) r.fail(`${path}.username`, "must not contain ':'");
    if (!password || !password.startsWith("$argon2id$")) {
      r.fail(
        `${path}.password`,
        "must be an argon2id hash (print one with `main.ts hash-password`)",
      );
    }
    if (usernames.has(username)) {
      r.fail(`${path}.username`, `"${username}" is used by another identity`);
    }
    usernames.add(username);
    cfg.auth.identities.push({ id, username, password });
  }
  for (const [name, v] of Object.entries(r.table(auth.oidc, "auth.oidc"))) {
    const path = `auth.oidc.${name}`;
    const t = r.table(v, path);
    r.only(t, path, ["issuer", "jwks_uri", "audience", "required_claims", "username_claim"]);
    // `oidc:<name>:<username>` in identity lists is read up to the second ':'.
    if (name.includes(":")) r.fail(path, `provider name "${name}" must not contain ':'`);
    const issuer = r.str(t, "issuer", path);
    if (!issuer || !isUrl(issuer)) r.fail(`${path}.issuer`, "must be an http(s) URL");
    const jwksUri = r.str(t, "jwks_uri", path) ?? null;
    if (jwksUri !== null && !isUrl(jwksUri)) r.fail(`${path}.jwks_uri`, "must be an http(s) URL");
    const claims: Record<string, string | string[]> = {};
    for (const [k, cv] of Object.entries(r.table(t.required_claims, `${path}.required_claims`))) {
      if (typeof cv === "string") claims[k] = cv;
      else if (Array.isArray(cv) && cv.every((x) => typeof x === "string")) {
        claims[k] = cv as string[];
      } else r.fail(`${path}.required_claims.${k}`, "must be a string or an array of strings");
    }
    if (usernames.has(name)) r.fail(path, `provider name "${name}" is also a Basic username`);
    cfg.auth.oidc.set(name, {
      name,
      issuer,
      jwksUri,
      audience: r.stringOrList(t, "audience", path) ?? [],
      requiredClaims: claims,
      usernameClaim: r.str(t, "username_claim", path) || "sub",
    });
  }
  if (auth.token_service !== undefined) {
    const path = "auth.token_service";
    const t = r.table(auth.token_service, path);
    r.only(t, path, ["secret_key", "realm", "service", "ttl_secs"]);
    const secretKey = r.str(t, "secret_key", path);
    if (!secretKey || new TextEncoder().encode(secretKey).byteLength < 32) {
      r.fail(`${path}.secret_key`, "must be at least 32 bytes");
    }
    // Unset, it is derived per request from Host (behind a load balancer, every replica and
    // hostname then names itself); `service` must then be set or defaults to "wharf".
    const realm = r.str(t, "realm", path) ?? null;
    if (realm !== null && !isUrl(realm)) {
      r.fail(`${path}.realm`, "must be an http(s) URL (where clients fetch tokens)");
    }
    cfg.auth.tokenService = {
      secretKey,
      realm,
      service: r.str(t, "service", path) ?? (realm ? new URL(realm).host : "wharf"),
      ttlSecs: r.int(t, "ttl_secs", path, 1, 86400) ?? 300,
    };
  }
}

/** The identities readAuth configured, for the identity lists read after it. */
function knownIdentities(cfg: Config): KnownIdentities {
  return {
    basicUsernames: new Set(cfg.auth.identities.map((i) => i.username)),
    oidcProviders: new Set(cfg.auth.oidc.keys()),
  };
}

/** `[blob_store.s3]`; credentials, region and endpoint may come from the AWS_* environment. */
function readS3(r: Reader, t: Table): S3StoreConfig {
  const p = "blob_store.s3";
  r.only(t, p, [
    "endpoint",
    "bucket",
    "region",
    "access_key_id",
    "secret_key",
    "key_prefix",
    "multipart_part_size",
    "presign_ttl_secs",
    "path_style",
  ]);
  const env = (k: string): string | null => {
    try {
      return Deno.env.get(k) || null;
    } catch {
      return null; // no --allow-env: the config must say it all
    }
  };
  const region = r.str(t, "region", p) ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ??
    "us-east-1";
  const endpoint = r.str(t, "endpoint", p) ?? env("AWS_ENDPOINT_URL_S3") ??
    env("AWS_ENDPOINT_URL") ?? `https://s3.${region}.amazonaws.com`;
  if (!isUrl(endpoint)) r.fail(`${p}.endpoint`, "must be an http(s) URL");
  const bucket = r.str(t, "bucket", p);
  if (!bucket) r.fail(`${p}.bucket`, "is required");
  const accessKeyId = r.str(t, "access_key_id", p) ?? env("AWS_ACCESS_KEY_ID");
  const secretKey = r.str(t, "secret_key", p) ?? env("AWS_SECRET_ACCESS_KEY");
  if (!accessKeyId || !secretKey) {
    r.fail(p, "needs access_key_id and secret_key (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)");
  }
  const keyPrefix = r.str(t, "key_prefix", p) ?? "";
  if (
    keyPrefix !== "" &&
    (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*\/?$/.test(keyPrefix) ||
      keyPrefix.split("/").some((seg) => seg === "." || seg === ".."))
  ) {
    r.fail(`${p}.key_prefix`, "must be path segments of [A-Za-z0-9._-]");
  }
  return {
    endpoint,
    bucket,
    region,
    accessKeyId,
    secretKey,
    sessionToken: env("AWS_SESSION_TOKEN"),
    keyPrefix,
    // S3 refuses parts under 5 MiB (but the last) and allows at most 10,000 parts.
    multipartPartSize: r.int(t, "multipart_part_size", p, 5 << 20, 5 << 30) ?? 8 << 20,
    presignTtlSecs: r.int(t, "presign_ttl_secs", p, 1, 7 * 86400) ?? 900,
    pathStyle: r.bool(t, "path_style", p) ?? false,
  };
}

function isUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}

export function isIpOrCidr(s: string): boolean {
  const [ip, bits, extra] = s.split("/");
  if (extra !== undefined) return false;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  const isV4 = !!v4 && v4.slice(1).every((o) => Number(o) <= 255);
  const isV6 = !isV4 && ip.includes(":") && /^[0-9a-fA-F:.]+$/.test(ip);
  if (!isV4 && !isV6) return false;
  if (bits === undefined) return true;
  if (!/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (isV4 ? 32 : 128);
}
