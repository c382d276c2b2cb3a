// The `scan-image` job: one platform image's report. The image's layers are read through the
// layer index (a scan waits for missing indexes, which it queues), merged into the filesystem a
// container would see, its package databases parsed, every package looked up in the current
// advisory snapshot, and the config's `Env` and `history` checked for credentials. The report
// is a derived file of the blob store (two slots per image, like the layer index), pointed to
// by a small KV record that names the advisory snapshot it used.
import { addJobs, ManifestMeta, type PlannedMutation } from "../metadata/mod.ts";
import { BlobMeta } from "../metadata/mod.ts";
import { type JobContext, PermanentJobError } from "../jobs/mod.ts";
import { indexLayerJob, type Registry, tarLayers } from "../registry/mod.ts";
export { SCAN_KIND, scanImageJob } from "../registry/mod.ts";
import { parseManifest } from "../oci/mod.ts";
import {
  INDEX_VERSION,
  indexKey,
  type IndexRecord,
  type LayerReader,
  type ListedEntry,
} from "../index/mod.ts";
import { SecretScanner } from "../index/mod.ts";
import { mergeLayers, resolvePath } from "./merged_fs.ts";
import { type Affected, affects, SEVERITIES, type Severity } from "./osv.ts";
import { type AdvisoryMeta, AdvisoryStore, lookupName } from "./advisory_store.ts";
import { MAX_LOCKFILES, npmLockfiles, parseNpmLock, pythonPackages } from "./language_pkgs.ts";
import { inventory, type Package, PACKAGE_DB_PATHS, STATUS_D_PREFIX } from "./package_dbs.ts";
import { advisoryEcosystems, type OsInfo } from "./os_release.ts";
import { compareVersions, type VersionScheme } from "./vercmp.ts";

export const SCAN_VERSION = 1;
export const scanKey = (digest: string): Deno.KvKey => ["scanrep", digest];

/** The KV pointer to a stored report. */
export interface ScanRecord {
  version: number;
  scanned_at: number;
  /** advisory snapshot used; null when none was loaded */
  snapshot: string | null;
  /** derived-file path of the report */
  file: string;
  counts: Record<Severity, number>;
  packages: number;
  os: string | null;
}

export interface Finding {
  id: string;
  aliases: string[];
  severity: Severity;
  package: string;
  installed: string;
  fixed: string | null;
  summary: string;
  references: string[];
  /** the package name the advisory is published under (a source package for Debian) */
  advisory_package: string;
  ecosystem: string;
}

export interface ConfigSecret {
  /** `env` (an `Env` entry) or `history` (a `created_by` line) */
  source: "env" | "history";
  /** position in `Env` or `history` */
  index: number;
  /** the variable's name for `env` (never its value) */
  name?: string;
  kind: string;
}

export interface ImageReport {
  digest: string;
  scanned_at: string;
  platform: { os: string; architecture: string; variant?: string } | null;
  os: OsInfo | null;
  advisories: { snapshot: string; loaded_at: string; records: number } | null;
  note?: string;
  counts: Record<Severity, number>;
  packages: Package[];
  findings: Finding[];
  config_secrets: ConfigSecret[];
  warnings: string[];
}

const MAX_CONFIG = 8 << 20;
/** The index record a scan uses for a layer whose blob is not stored. */
const NOT_STORED: IndexRecord = {
  version: INDEX_VERSION,
  state: "unsupported",
  compression: null,
  uncompressedSize: 0,
  entries: 0,
  error: "its blob is not stored here",
  indexedAt: 0,
  base: "",
};
// A scan waits this long per attempt for missing layer indexes, then retries with backoff.
const INDEX_WAIT_MS = 60 * 1000;
const DB_BASENAMES = new Set(PACKAGE_DB_PATHS.map((p) => p.slice(p.lastIndexOf("/") + 1)));

export const SEVERITY_RANK: Record<Severity, number> = {
  CRITICAL: 0,
  HIGH: 1,
  MEDIUM: 2,
  LOW: 3,
  UNKNOWN: 4,
};

const SCHEMES: Record<Package["type"], VersionScheme> = {
  deb: "dpkg",
  apk: "apk",
  rpm: "rpm",
  npm: "semver",
  pypi: "pep440",
};

/** OSV's ecosystem for each language package type (distro packages go by the OS release). */
const LANGUAGE_ECOSYSTEMS: Partial<Record<Package["type"], string>> = { npm: "npm", pypi: "PyPI" };

const PY_META_PATH = /(^|\/)(site|dist)-packages\/[^/]+\.(dist|egg)-info(\/|$)/;
const LOCKFILE_NAMES = new Set(["package-lock.json", ".package-lock.json"]);

function schemeOf(p: Package): VersionScheme {
  return SCHEMES[p.type];
}

const zeroCounts = (): Record<Severity, number> =>
  Object.fromEntries(SEVERITIES.map((s) => [s, 0])) as Record<Severity, number>;

/** CVE ids a record stands for: its own id when a CVE, and its CVE aliases. */
function cves(a: Affected): string[] {
  return [a.id, ...a.aliases].filter((x) => /^CVE-\d{4}-\d+$/.test(x));
}

/**
 * Findings of one package against advisories from `ecosystems` (most specific first). A CVE
 * already covered by a record of a more specific ecosystem (the distro release's own) is not
 * reported again from a more general one.
 */
export function matchPackage(
  pkg: Package,
  byEcosystem: Array<{ ecosystem: string; entries: Affected[] }>,
): Finding[] {
  const scheme = schemeOf(pkg);
  const installed = pkg.type === "deb" ? (pkg.source_version ?? pkg.version) : pkg.version;
  const compare = (a: string, b: string) => compareVersions(scheme, a, b);
  const out: Finding[] = [];
  const covered = new Set<string>();
  const seen = new Set<string>();
  for (const { ecosystem, entries } of byEcosystem) {
    const here: string[] = [];
    for (const a of entries) {
      if (seen.has(a.id)) continue;
      const ids = cves(a);
      if (ids.length > 0 && ids.every((c) => covered.has(c))) continue;
      let r;
      try {
        r = affects(a, installed, compare);
      } catch {
        continue; // a version the scheme cannot order is no evidence either way
      }
      if (!r.affected) continue;
      seen.add(a.id);
      here.push(...ids);
      out.push({
        id: a.id,
        aliases: a.aliases,
        severity: a.severity,
        package: pkg.name,
        installed: pkg.version,
        fixed: r.fixed,
        summary: a.summary,
        references: a.references,
        advisory_package: a.package,
        ecosystem,
      });
    }
    for (const c of here) covered.add(c);
  }
  return out;
}

export function sortFindings(f: Finding[]): Finding[] {
  return f.sort((a, b) =>
    SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity] ||
    (a.package < b.package ? -1 : a.package > b.package ? 1 : 0) ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) ||
    // two copies of one package (npm nests them): by version, then as listed
    (a.installed < b.installed ? -1 : a.installed > b.installed ? 1 : 0)
  );
}

/** Credentials in the config's `Env` values and `history[].created_by` lines. */
export function configSecrets(config: unknown): ConfigSecret[] {
  const out: ConfigSecret[] = [];
  const c = (config as { config?: { Env?: unknown }; history?: unknown }) ?? {};
  const env = Array.isArray(c.config?.Env) ? c.config!.Env as unknown[] : [];
  const enc = new TextEncoder();
  const scan = (text: string) => {
    const s = new SecretScanner("config.json");
    s.push(enc.encode(text));
    return s.finish();
  };
  env.forEach((v, index) => {
    if (typeof v !== "string") return;
    const eq = v.indexOf("=");
    const name = eq > 0 ? v.slice(0, eq) : v;
    // As the shell would write it, so the `KEY=value` rules (secret access keys) apply.
    const kinds = new Set(scan(`${name}=${eq > 0 ? v.slice(eq + 1) : ""}`).map((f) => f.kind));
    for (const kind of kinds) out.push({ source: "env", index, name: name.slice(0, 256), kind });
  });
  const history = Array.isArray(c.history) ? c.history : [];
  history.forEach((h, index) => {
    const line = (h as { created_by?: unknown })?.created_by;
    if (typeof line !== "string") return;
    const kinds = new Set(scan(line.replaceAll("\t", " ")).map((f) => f.kind));
    for (const kind of kinds) out.push({ source: "history", index, kind });
  });
  return out;
}

export class Scanner {
  readonly advisories: AdvisoryStore;
  private readonly meta: ManifestMeta;
  private readonly blobs: BlobMeta;

  constructor(
    private readonly registry: Registry,
    private readonly reader: LayerReader,
    private readonly opts: { maxDatabaseSize: number },
  ) {
    this.advisories = new AdvisoryStore(registry.kv);
    this.meta = new ManifestMeta(registry.kv);
    this.blobs = new BlobMeta(registry.kv);
  }

  async record(digest: string): Promise<ScanRecord | null> {
    return (await this.registry.kv.get<ScanRecord>(scanKey(digest))).value;
  }

  /** The stored report of `digest`'s current record. */
  async report(rec: ScanRecord): Promise<ImageReport> {
    const s = await this.registry.store.readDerived(rec.file);
    return JSON.parse(await new Response(s).text());
  }

  async run(job: JobContext): Promise<void> {
    const p = job.payload as { digest?: unknown; namespace?: unknown } | null;
    if (typeof p?.digest !== "string" || typeof p?.namespace !== "string") {
      throw new PermanentJobError("payload needs a digest and a namespace");
    }
    const report = await this.scan(p.namespace, p.digest, job.signal);
    if (!report) return;
    // A scan is background work: required webhooks are not consulted; the deliveries are
    // written with the report's record.
    const ev = await this.registry.events.prepare("scan.completed", {
      namespace: p.namespace,
      digest: p.digest,
      reference: p.digest,
      severity_counts: { ...report.counts },
    }, false);
    await this.store(p.digest, report, () => ev.plan());
    ev.committed();
  }

  /** The report of one platform image, or null for a manifest that is not one. */
  async scan(ns: string, digest: string, signal?: AbortSignal): Promise<ImageReport | null> {
    const rev = await this.meta.revision(ns, digest);
    if (!rev) throw new PermanentJobError(`${digest} is not a manifest of ${ns}`);
    const body = await this.registry.manifests.body(digest, rev);
    const parsed = parseManifest(body, rev.mediaType);
    const doc = JSON.parse(new TextDecoder().decode(body));
    const configDigest = doc?.config?.digest;
    if (parsed.children.length > 0 || typeof configDigest !== "string") return null;
    const warnings: string[] = [];
    let config: unknown = null;
    const cfgBlob = await this.blobs.blob(configDigest);
    if (cfgBlob && cfgBlob.size <= MAX_CONFIG) {
      try {
        config = JSON.parse(
          new TextDecoder().decode(await this.registry.store.readAll(configDigest)),
        );
      } catch {
        warnings.push("the image config is not JSON");
      }
    } else warnings.push("the image config is missing or too large to read");
    const layers = tarLayers(parsed);
    const recs = await this.indexes(layers, signal);
    const sizes = await Promise.all(layers.map(async (d) => (await this.blobs.blob(d))?.size ?? 0));
    for (let i = 0; i < layers.length; i++) {
      if (recs[i].state !== "ready") {
        warnings.push(`layer ${layers[i]} is ${recs[i].state}: ${recs[i].error ?? ""}`.trim());
      }
    }
    const wanted = (e: ListedEntry) => {
      const base = e.path.slice(e.path.lastIndexOf("/") + 1);
      return e.kind === "symlink" || DB_BASENAMES.has(base) || LOCKFILE_NAMES.has(base) ||
        e.path.startsWith(STATUS_D_PREFIX) || PY_META_PATH.test(e.path);
    };
    const merged = await mergeLayers(
      recs.map((rec) => () =>
        rec.state === "unsupported" ? (async function* () {})() : this.reader.entries(rec)
      ),
      wanted,
    );
    const files = new Map<string, Uint8Array>();
    const readMerged = async (path: string, into = files) => {
      const real = resolvePath(merged.files, path);
      if (real === null) return;
      const m = merged.files.get(real);
      if (!m) return;
      let entry = m.entry;
      const rec = recs[m.layer];
      for (let hops = 0; entry.kind === "hardlink" && hops < 8; hops++) {
        const t = await this.reader.entry(rec, entry.link_target ?? "");
        if (!t) return;
        entry = t;
      }
      if (entry.kind !== "file") return;
      if (entry.size > this.opts.maxDatabaseSize) {
        warnings.push(`${path}: ${entry.size} bytes, over max_database_size: not read`);
        return;
      }
      const s = await this.reader.read(
        layers[m.layer],
        sizes[m.layer],
        rec,
        entry.offset,
        entry.offset + entry.size - 1,
      );
      into.set(path, new Uint8Array(await new Response(s).arrayBuffer()));
    };
    for (const path of PACKAGE_DB_PATHS) {
      signal?.throwIfAborted();
      await readMerged(path);
    }
    for (const path of merged.files.keys()) {
      if (path.startsWith(STATUS_D_PREFIX) && merged.files.get(path)!.entry.kind === "file") {
        await readMerged(path);
      }
    }
    const inv = inventory(files);
    warnings.push(...inv.warnings);
    // Language packages: Python metadata directories by name, npm lockfiles by content.
    const langFiles = new Map<string, Uint8Array>();
    const lockfiles = npmLockfiles(merged.files.keys());
    if (lockfiles.length > MAX_LOCKFILES) {
      warnings.push(`${lockfiles.length} npm lockfiles: the first ${MAX_LOCKFILES} are read`);
    }
    for (const path of lockfiles.slice(0, MAX_LOCKFILES)) {
      signal?.throwIfAborted();
      await readMerged(path, langFiles);
    }
    const language = [pythonPackages(merged.files.keys())];
    for (const [path, bytes] of langFiles) {
      language.push(parseNpmLock(new TextDecoder().decode(bytes), path));
    }
    for (const r of language) {
      inv.packages.push(...r.packages);
      warnings.push(...r.warnings);
    }
    const adv = await this.advisories.meta();
    const findings = adv ? await this.match(adv, inv.os, inv.packages) : [];
    const counts = zeroCounts();
    for (const f of findings) counts[f.severity]++;
    const cfg = config as { os?: unknown; architecture?: unknown; variant?: unknown } | null;
    return {
      digest,
      scanned_at: new Date().toISOString(),
      platform: typeof cfg?.os === "string" && typeof cfg?.architecture === "string"
        ? {
          os: cfg.os,
          architecture: cfg.architecture,
          ...(typeof cfg.variant === "string" ? { variant: cfg.variant } : {}),
        }
        : null,
      os: inv.os,
      advisories: adv
        ? {
          snapshot: adv.snapshot,
          loaded_at: new Date(adv.loaded_at).toISOString(),
          records: adv.records,
        }
        : null,
      ...(adv ? {} : { note: "no advisory data is loaded: packages are listed, not matched" }),
      counts,
      packages: inv.packages,
      findings: sortFindings(findings),
      config_secrets: config ? configSecrets(config) : [],
      warnings,
    };
  }

  private async match(
    adv: AdvisoryMeta,
    os: OsInfo | null,
    packages: Package[],
  ): Promise<Finding[]> {
    const distro = os ? advisoryEcosystems(os).filter((e) => adv.ecosystems[e]) : [];
    const out: Finding[] = [];
    for (const pkg of packages) {
      const lang = LANGUAGE_ECOSYSTEMS[pkg.type];
      const ecosystems = lang ? (adv.ecosystems[lang] ? [lang] : []) : distro;
      if (ecosystems.length === 0) continue;
      const names = [...new Set([pkg.source_name ?? pkg.name, pkg.name])];
      const byEcosystem = [];
      for (const ecosystem of ecosystems) {
        const entries: Affected[] = [];
        for (const n of names) {
          entries.push(
            ...await this.advisories.lookup(adv.snapshot, ecosystem, lookupName(ecosystem, n)),
          );
        }
        byEcosystem.push({ ecosystem, entries });
      }
      out.push(...matchPackage(pkg, byEcosystem));
    }
    return out;
  }

  /** The index records of `layers`, queueing and awaiting the missing ones. */
  private async indexes(layers: string[], signal?: AbortSignal): Promise<IndexRecord[]> {
    const deadline = Date.now() + INDEX_WAIT_MS;
    let queued = false;
    for (;;) {
      const got = await Promise.all(layers.map(async (d) => {
        const rec = (await this.registry.kv.get<IndexRecord>(indexKey(d))).value;
        if (rec && rec.version >= INDEX_VERSION) return rec;
        // A layer whose bytes are not here (a manifest pushed with references it does not own)
        // will never be indexed: the report says so instead of waiting for it.
        return (await this.blobs.blob(d)) ? null : NOT_STORED;
      }));
      const missing = layers.filter((_, i) => got[i] === null);
      if (missing.length === 0) return got as IndexRecord[];
      if (!queued) {
        for (const d of missing) await this.registry.jobs.queue("index").enqueue(indexLayerJob(d));
        queued = true;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${missing.length} layer(s) not indexed yet: ${missing.slice(0, 5).join(", ")}${
            missing.length > 5 ? ", …" : ""
          }`,
        );
      }
      signal?.throwIfAborted();
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Writes the report to the slot the current record does not use, then points at it. */
  private async store(
    digest: string,
    report: ImageReport,
    jobs: () => PlannedMutation[],
  ): Promise<void> {
    const cur = await this.registry.kv.get<ScanRecord>(scanKey(digest));
    const [alg, hex] = digest.split(":");
    const dir = `reports/${alg}/${hex}`;
    const file = cur.value?.file === `${dir}/a.json` ? `${dir}/b.json` : `${dir}/a.json`;
    const bytes = new TextEncoder().encode(JSON.stringify(report));
    await this.registry.store.writeDerived(file, ReadableStream.from([bytes]));
    const rec: ScanRecord = {
      version: SCAN_VERSION,
      scanned_at: Date.parse(report.scanned_at),
      snapshot: report.advisories?.snapshot ?? null,
      file,
      counts: report.counts,
      packages: report.packages.length,
      os: report.os ? `${report.os.id} ${report.os.version_id ?? ""}`.trim() : null,
    };
    const op = this.registry.kv.atomic().check(cur).set(scanKey(digest), rec);
    // A lost race means another run of this job stored its report (and its event) first.
    await addJobs(op, jobs()).commit();
  }
}
