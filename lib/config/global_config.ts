// `[global]`: limits and switches for every repository, the scrub, integrity, audit, job queue
// and index tables, then the policies read by hooks.ts, rate_limit.ts and quota.ts.
import type { Config, IndexConfig, JobQueueConfig } from "./schema.ts";
import { JOB_QUEUES } from "./schema.ts";
import { readAuthWebhookRef, readRetention } from "./hooks.ts";
import { readRateLimit } from "./rate_limit.ts";
import { readGlobalQuota } from "./quota.ts";
import { knownIdentities } from "./auth_config.ts";
import { isIpOrCidr, type Reader } from "./config_reader.ts";
import { readPolicy, readSandbox, SANDBOX_KEYS } from "./shared_tables.ts";
import type { Table } from "./table_readers.ts";

/** `[global]`'s own keys and tables (the policies follow in readGlobalPolicies). */
export function readGlobal(r: Reader, g: Table, cfg: Config): void {
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
}

/** `[global]`'s authorization webhook, retention policy, rate limit and quota. */
export function readGlobalPolicies(r: Reader, g: Table, cfg: Config): void {
  const fail = r.fail.bind(r);
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
