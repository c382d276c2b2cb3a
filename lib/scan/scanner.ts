// The `scan-image` job: one platform image's report. The image's layers are read through the
// layer index (a scan waits for missing indexes, which it queues), merged into the filesystem a
// container would see, its package databases parsed, every package looked up in the current
// advisory snapshot, and the config's `Env` and `history` checked for credentials. The report
// is a derived file of the blob store (two slots per image, like the layer index), pointed to
// by a small KV record that names the advisory snapshot it used. A scan never stores a report
// built from parses that could not run (a layer whose indexing could not run, a sandbox that could
// not start): it fails for a machine reason, is retried, and leaves the stored report as it is
// (machine_stale.ts tells the reports older versions built so).
import type { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import { isPermanent, type JobContext, type JobQueues, PermanentJobError } from "../jobs/mod.ts";
import type { Registry } from "../registry/mod.ts";
import { type BlobStore, readVerified } from "../storage/mod.ts";
import { type LayerIndexReader, tarLayers } from "../index/mod.ts";
import type { WriteEffects, WriteFacts } from "../effects/mod.ts";
import { parseManifest } from "../oci/mod.ts";
import {
  errorText,
  INDEX_VERSION,
  type IndexRecord,
  type LayerReader,
  listed,
  type ListedEntry,
  machineFailure,
  MachineFailureError,
  machineMessage,
} from "../index/mod.ts";
import { log } from "../log.ts";
import { builtOnFailedParses } from "./machine_stale.ts";
export { type ConfigSecret, configSecrets } from "./config_secrets.ts";
import type { ConfigSecret } from "./config_secrets.ts";
import { planImage, type ScanPlan } from "./scan_plan.ts";
import { INLINE_MERGE_ENTRIES, listingsFor } from "./listing_frames.ts";
import type { PlanArgs } from "./plan_child.ts";
import { type Affected, affects, SEVERITIES, type Severity } from "./osv.ts";
import { type AdvisoryMeta, type AdvisoryStore, lookupName } from "./advisory_store.ts";
import type { ScanRecord, ScanRecords } from "./scan_records.ts";
import type { Package } from "./package_dbs.ts";
import { type ContentResult, readImageContent } from "./image_content.ts";
import {
  type ContentFile,
  type ContentHeader,
  decodeInput,
  encodeHeader,
} from "./content_child.ts";
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import { concatBytes } from "../streams/mod.ts";
import type { ScanConfig } from "../config/mod.ts";
import { advisoryEcosystems, type OsInfo } from "./os_release.ts";
import { compareVersions, type VersionScheme } from "./vercmp.ts";
import { imageEcosystems } from "./ecosystems.ts";

export const SCAN_VERSION = 1;

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

export interface ImageReport {
  digest: string;
  scanned_at: string;
  platform: { os: string; architecture: string; variant?: string } | null;
  os: OsInfo | null;
  advisories: { snapshot: string; loaded_at: string; records: number } | null;
  /**
   * Whether the packages were matched against advisory records at all. False (with
   * `not_checked`, the reason) when no snapshot is loaded, the snapshot holds no records, or
   * it holds none for any of the image's ecosystems: an empty `findings` then means "not
   * checked", never "clean". Absent in reports written before it existed (read as `advisories
   * !== null`).
   */
  vulnerabilities_checked: boolean;
  not_checked?: string;
  note?: string;
  counts: Record<Severity, number>;
  packages: Package[];
  findings: Finding[];
  config_secrets: ConfigSecret[];
  warnings: string[];
}

const MAX_CONFIG = 8 << 20;
/** 50,000 findings make a ~25 MB report, read back and rendered in ~0.3 s. */
const MAX_FINDINGS = 50_000;
/** 100,000 packages as JSON with their warnings stay far below this. */
const MAX_CONTENT_OUTPUT = 256 << 20;
/** A config this small is parsed in the serving process when it is all there is to parse. */
const INLINE_CONFIG = 256 << 10;
const CONTENT_CHILD = new URL("./content_child.ts", import.meta.url);
const PLAN_CHILD = new URL("./plan_child.ts", import.meta.url);
/** The plan's files and Python paths are bounded by max_packages: far below this. */
const MAX_PLAN_OUTPUT = 64 << 20;

/** A file the parse will get, read from its layer (or the config blob) as it is sent. */
interface Planned {
  path: string;
  kind: ContentFile["kind"];
  size: number;
  open: () => Promise<ReadableStream<Uint8Array>>;
}
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
/** A report's record commit, retried past bookkeeping writes to the same record. */
const STORE_ATTEMPTS = 3;

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

/**
 * Why a report's packages were not matched against any advisory record, or null when they were
 * (an image of no packages, with advisory data loaded, is checked: there was nothing to find).
 * A report that matched nothing must never read as "no known vulnerabilities".
 */
export function uncheckedReason(
  adv: AdvisoryMeta | null,
  os: OsInfo | null,
  packages: Package[],
): string | null {
  if (!adv) return "no advisory data is loaded";
  if (adv.records === 0) return "the advisory snapshot holds no records";
  if (packages.length === 0) return null;
  const has = (e: string) => (adv.ecosystems[e] ?? 0) > 0;
  const distro = os ? advisoryEcosystems(os) : [];
  const covered = packages.some((p) => {
    const lang = LANGUAGE_ECOSYSTEMS[p.type];
    return lang ? has(lang) : distro.some(has);
  });
  if (covered) return null;
  const wanted = imageEcosystems(os, packages.flatMap((p) => LANGUAGE_ECOSYSTEMS[p.type] ?? []));
  return `the advisory snapshot holds no records for ${
    wanted.length > 0 ? wanted.join(", ") : "this image's packages"
  }`;
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

/** What image reports work with, handed in by the composition root (lib/services). */
export interface ScanDeps {
  /** its own records: each image's report pointer (scan_records.ts) */
  records: ScanRecords;
  /** the advisory snapshot the packages are matched against (advisory_store.ts) */
  advisories: AdvisoryStore;
  /** the layer index: each layer's current record, and its index job queued when a scan waits */
  layers: LayerIndexReader;
  /** the image's revision in its namespace */
  revisions: Pick<ManifestMeta, "revision">;
  /** blob records: a config's size, whether a layer is stored here */
  blobs: Pick<BlobMeta, "blob">;
  /** config blobs and layers; the reports, written as derived files */
  store: BlobStore;
  /** the `scan` queue's handlers and jobs */
  jobs: Pick<JobQueues, "handle" | "queue">;
  /** a stored report's events, committed with its record */
  effects: WriteEffects;
  /** manifest bodies, and the references a diff names */
  manifests: Pick<Registry["manifests"], "body" | "resolve">;
}

export class Scanner {
  readonly advisories: AdvisoryStore;
  private readonly meta: ScanDeps["revisions"];
  private readonly blobs: ScanDeps["blobs"];
  private readonly records: ScanRecords;
  private readonly files: BlobStore;
  /**
   * Scans of this process that failed for a machine reason since it started: a heal pass runs
   * again after one (lib/services/heal.ts).
   */
  machineFailures = 0;

  constructor(
    private readonly deps: ScanDeps,
    private readonly reader: LayerReader,
    private readonly opts: Pick<
      ScanConfig,
      "maxDatabaseSize" | "maxPackages" | "sandbox" | "budget"
    >,
  ) {
    this.records = deps.records;
    this.files = deps.store;
    this.advisories = deps.advisories;
    this.meta = deps.revisions;
    this.blobs = deps.blobs;
  }

  /**
   * The stored record. One whose report was built from parses that could not run reads as out
   * of date (version 0): whatever rescans out-of-date reports (a report request, `scan`, a heal)
   * rescans it, while it is still served until the rescan lands.
   */
  async record(digest: string): Promise<ScanRecord | null> {
    const e = await this.records.read(digest);
    if (!e.value) return null;
    return await this.sound(e) ? e.value : { ...e.value, version: 0 };
  }

  /**
   * Whether a stored report was built from parses that ran: a record written since says so; an
   * older one's report is read once, and the answer kept in its record.
   */
  async sound(e: Deno.KvEntry<ScanRecord>): Promise<boolean> {
    if (e.value.sound !== undefined) return e.value.sound;
    let report: ImageReport;
    try {
      report = await this.report(e.value);
    } catch {
      return true; // an unreadable report is the report request's error, not a rescan's
    }
    const sound = !builtOnFailedParses(report);
    // Lost to a write meanwhile (a rescan's record says it itself): read again next time.
    await this.records.replaceIf(e, { ...e.value, sound }).catch(() => {});
    return sound;
  }

  /** The stored report of `digest`'s current record. */
  async report(rec: ScanRecord): Promise<ImageReport> {
    const s = await this.files.readDerived(rec.file);
    return JSON.parse(await new Response(s).text());
  }

  async run(job: JobContext): Promise<void> {
    const p = job.payload as { digest?: unknown; namespace?: unknown } | null;
    if (typeof p?.digest !== "string" || typeof p?.namespace !== "string") {
      throw new PermanentJobError("payload needs a digest and a namespace");
    }
    let report: ImageReport | null;
    try {
      report = await this.scan(p.namespace, p.digest, job.signal);
    } catch (e) {
      if (isPermanent(e)) throw e;
      // Nothing is stored: the report the image has stays until a scan whose parses ran lands.
      const message = machineMessage(`scan of ${p.digest}`, errorText(e));
      log.warn(message, { digest: p.digest, namespace: p.namespace });
      this.machineFailures++;
      throw new MachineFailureError(message, { cause: e });
    }
    if (!report) return;
    // The report's events are written with its record.
    const fx = await this.deps.effects.begin({
      kind: "scan-report",
      ns: p.namespace,
      digest: p.digest,
      counts: report.counts,
      ...(report.vulnerabilities_checked ? {} : { notChecked: report.not_checked ?? "" }),
    });
    await this.store(p.namespace, p.digest, report, fx);
    await fx.committed();
  }

  /** The report of one platform image, or null for a manifest that is not one. */
  async scan(ns: string, digest: string, signal?: AbortSignal): Promise<ImageReport | null> {
    const rev = await this.meta.revision(ns, digest);
    if (!rev) throw new PermanentJobError(`${digest} is not a manifest of ${ns}`);
    const body = await this.deps.manifests.body(digest, rev);
    const parsed = parseManifest(body, rev.mediaType);
    const doc = JSON.parse(new TextDecoder().decode(body));
    const configDigest = doc?.config?.digest;
    if (parsed.children.length > 0 || typeof configDigest !== "string") return null;
    const warnings: string[] = [];
    const planned: Planned[] = [];
    const cfgBlob = await this.blobs.blob(configDigest);
    if (cfgBlob && cfgBlob.size <= MAX_CONFIG) {
      planned.push({
        path: "config.json",
        kind: "config",
        size: cfgBlob.size,
        // Read whole and checked against its digest: a config that does not match is not parsed.
        open: async () => ReadableStream.from([await readVerified(this.files, configDigest)]),
      });
    }
    const layers = tarLayers(parsed);
    const recs = await this.indexes(layers, signal);
    const sizes = await Promise.all(layers.map(async (d) => (await this.blobs.blob(d))?.size ?? 0));
    for (let i = 0; i < layers.length; i++) {
      if (recs[i].state !== "ready") {
        warnings.push(`layer ${layers[i]} is ${recs[i].state}: ${recs[i].error ?? ""}`.trim());
      }
    }
    const scanPlan = await this.plan(recs, warnings, signal);
    // Hardlinks are followed and sizes checked here: both read Wharf's own records only.
    for (const f of scanPlan.files) {
      signal?.throwIfAborted();
      let entry = f.entry;
      const rec = recs[f.layer];
      for (let hops = 0; entry?.kind === "hardlink" && hops < 8; hops++) {
        entry = (await this.reader.entry(rec, entry.link_target ?? "")) as ListedEntry;
      }
      if (entry?.kind !== "file") continue;
      if (entry.size > this.opts.maxDatabaseSize) {
        warnings.push(`${f.path}: ${entry.size} bytes, over max_database_size: not read`);
        continue;
      }
      const e = entry;
      const layer = f.layer;
      planned.push({
        path: f.path,
        kind: f.kind,
        size: e.size,
        open: () =>
          this.reader.read(layers[layer], sizes[layer], rec, e.offset, e.offset + e.size - 1),
      });
    }
    const pythonPaths = scanPlan.pythonPaths;
    const content = await this.readContent(planned, pythonPaths, signal);
    warnings.push(...content.warnings);
    const adv = await this.advisories.meta();
    const matched = adv ? await this.match(adv, content.os, content.packages) : [];
    const notChecked = uncheckedReason(adv, content.os, content.packages);
    // The report is read back whole and rendered (JSON, CycloneDX, SPDX) in the serving process
    // on each request: its size is bounded whatever packages an image claims to hold.
    const findings = sortFindings(matched).slice(0, MAX_FINDINGS);
    if (matched.length > MAX_FINDINGS) {
      warnings.push(`${matched.length} findings: the ${MAX_FINDINGS} most severe are listed`);
    }
    // Counted before the cut: the severity summary stays true.
    const counts = zeroCounts();
    for (const f of matched) counts[f.severity]++;
    return {
      digest,
      scanned_at: new Date().toISOString(),
      platform: content.platform,
      os: content.os,
      advisories: adv
        ? {
          snapshot: adv.snapshot,
          loaded_at: new Date(adv.loaded_at).toISOString(),
          records: adv.records,
        }
        : null,
      vulnerabilities_checked: notChecked === null,
      ...(notChecked === null ? {} : { not_checked: notChecked }),
      ...(notChecked === null ? {} : { note: `not checked: ${notChecked}` }),
      counts,
      packages: content.packages,
      findings,
      config_secrets: content.configSecrets,
      warnings,
    };
  }

  /**
   * Which files of the image the report reads (scan_plan.ts): merged from the layer listings
   * here when the image lists few entries, else in a sandbox process fed the listings. A budget
   * passed leaves a plan without files, and a warning saying why.
   */
  private async plan(
    recs: IndexRecord[],
    warnings: string[],
    signal?: AbortSignal,
  ): Promise<ScanPlan> {
    const lists = recs.map((rec) => listed(rec) ? rec : null);
    const entries = lists.reduce((n, r) => n + (r?.entries ?? 0), 0);
    if (this.opts.sandbox === "off" || entries <= INLINE_MERGE_ENTRIES) {
      const plan = await planImage(
        lists.map((rec) => () => rec ? this.reader.entries(rec) : (async function* () {})()),
        this.opts.maxPackages,
      );
      warnings.push(...plan.warnings);
      return plan;
    }
    const { input, readPaths, stdin } = listingsFor(this.reader, [lists], this.opts.sandbox);
    try {
      const plan = await runSandboxedJson<ScanPlan>({
        mode: this.opts.sandbox,
        label: "scan",
        module: PLAN_CHILD,
        args: { listings: input, maxPackages: this.opts.maxPackages } satisfies PlanArgs,
        readPaths,
        stdin,
        budget: this.opts.budget,
        maxOutputBytes: MAX_PLAN_OUTPUT,
        signal,
      });
      warnings.push(...plan.warnings);
      return plan;
    } catch (e) {
      if (!isSandboxVerdict(e)) throw e;
      warnings.push(`the layers' files were not looked through: ${e.message}`);
      return { files: [], pythonPaths: [], warnings: [] };
    }
  }

  /**
   * Parses the planned files: in a sandbox process fed on its input (`[scan] sandbox`), or
   * here with `sandbox = "off"`. A budget passed leaves a report of the image's layers and
   * config without packages, and says why.
   */
  private async readContent(
    planned: Planned[],
    pythonPaths: string[],
    signal?: AbortSignal,
  ): Promise<ContentResult> {
    const header: ContentHeader = {
      files: planned.map(({ path, kind, size }) => ({ path, kind, size })),
      pythonPaths,
      maxPackages: this.opts.maxPackages,
    };
    async function* feed(): AsyncGenerator<Uint8Array> {
      yield encodeHeader(header);
      for (const f of planned) {
        let n = 0;
        for await (const c of await f.open()) {
          const part = c.subarray(0, Math.max(0, f.size - n));
          n += part.length;
          // Written to the sandbox before the next chunk is read (runSandboxed), so no copy.
          if (part.length) yield part;
          if (n >= f.size) break;
        }
        if (n !== f.size) throw new Error(`${f.path}: ${n} of ${f.size} bytes could be read`);
      }
    }
    // An image with nothing to parse but a small config (most pushes in tests, many artifacts)
    // is read here: a few milliseconds of JSON, against a process start.
    const onlySmallConfig = planned.every((f) => f.kind === "config" && f.size <= INLINE_CONFIG) &&
      pythonPaths.length === 0;
    if (this.opts.sandbox === "off" || onlySmallConfig) {
      const parts: Uint8Array[] = [];
      for await (const c of feed()) parts.push(c.slice());
      return readImageContent(
        decodeInput(concatBytes(parts, parts.reduce((n, p) => n + p.length, 0))),
      );
    }
    // A store that fails while feeding is this side's trouble, retried as the job: not a verdict
    // on the image.
    let feedError: unknown = null;
    const fed = async function* () {
      try {
        yield* feed();
      } catch (e) {
        feedError = e;
        throw e;
      }
    };
    try {
      return await runSandboxedJson<ContentResult>({
        mode: this.opts.sandbox,
        label: "scan",
        module: CONTENT_CHILD,
        args: null,
        stdin: ReadableStream.from(fed()),
        budget: this.opts.budget,
        maxOutputBytes: MAX_CONTENT_OUTPUT,
        signal,
      });
    } catch (e) {
      if (feedError) throw feedError;
      // The same bytes would end the same way: the report says so, rather than the scan failing
      // (and every report request queueing it again).
      if (!isSandboxVerdict(e)) throw e;
      return {
        os: null,
        packages: [],
        platform: null,
        configSecrets: [],
        warnings: [`packages and config were not read: ${e.message}`],
      };
    }
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

  /**
   * The index records of `layers`, queueing and awaiting the missing ones. A layer whose indexing
   * could not run (machine_failure.ts) fails the scan at once, its index job made sure to be
   * pending: the report would be built from no files of it.
   */
  private async indexes(layers: string[], signal?: AbortSignal): Promise<IndexRecord[]> {
    const deadline = Date.now() + INDEX_WAIT_MS;
    let queued = false;
    for (;;) {
      const got = await Promise.all(layers.map(async (d) => {
        const rec = await this.deps.layers.record(d);
        const broken = machineFailure(rec);
        if (broken !== null) {
          await this.deps.layers.queueIndex(d);
          throw new Error(`layer ${d} could not be indexed: ${broken}`);
        }
        if (rec && rec.version >= INDEX_VERSION) return rec;
        // A layer whose bytes are not here (a manifest pushed with references it does not own)
        // will never be indexed: the report says so instead of waiting for it.
        return (await this.blobs.blob(d)) ? null : NOT_STORED;
      }));
      const missing = layers.filter((_, i) => got[i] === null);
      if (missing.length === 0) return got as IndexRecord[];
      if (!queued) {
        for (const d of missing) await this.deps.layers.queueIndex(d);
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
    ns: string,
    digest: string,
    report: ImageReport,
    effects: WriteFacts,
  ): Promise<void> {
    const cur = await this.records.read(digest);
    const [alg, hex] = digest.split(":");
    const dir = `reports/${alg}/${hex}`;
    const file = cur.value?.file === `${dir}/a.json` ? `${dir}/b.json` : `${dir}/a.json`;
    const bytes = new TextEncoder().encode(JSON.stringify(report));
    await this.files.writeDerived(file, ReadableStream.from([bytes]));
    // No report of parses that could not run is stored (run throws first).
    const rec: ScanRecord = {
      version: SCAN_VERSION,
      scanned_at: Date.parse(report.scanned_at),
      snapshot: report.advisories?.snapshot ?? null,
      file,
      counts: report.counts,
      packages: report.packages.length,
      checked: report.vulnerabilities_checked,
      os: report.os ? `${report.os.id} ${report.os.version_id ?? ""}`.trim() : null,
      ecosystems: imageEcosystems(
        report.os,
        report.packages.flatMap((p) => LANGUAGE_ECOSYSTEMS[p.type] ?? []),
      ),
      sound: true,
    };
    let seen = cur;
    for (let attempt = 0; attempt < STORE_ATTEMPTS; attempt++) {
      effects.attempt();
      const jobs = effects.mutationsFor({ kind: "report-stored", ns, digest });
      if (await this.records.replaceIf(seen, rec, jobs)) return effects.landed();
      // A lost race means another run of this job stored its report (and its event) first,
      // unless only the record's bookkeeping changed (its `sound` mark, a heal count): the same
      // report file.
      const now = await this.records.read(digest);
      if (now.value?.file !== cur.value?.file) return;
      seen = now;
    }
  }
}
