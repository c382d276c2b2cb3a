// The `scan-image` job: one platform image's report. The image's layers are read through the
// layer index (a scan waits for missing indexes, which it queues), merged into the filesystem a
// container would see, its package databases parsed, every package looked up in the current
// advisory snapshot, and the config's `Env` and `history` checked for credentials. The report
// is a derived file of the blob store (two slots per image, like the layer index), pointed to
// by a small KV record that names the advisory snapshot it used. A scan never stores a report
// built from parses that could not run (a layer whose indexing could not run, a sandbox that could
// not start): it fails for a machine reason, is retried, and leaves the stored report as it is
// (machine_stale.ts tells the reports older versions built so).
//
// The steps, one file each: image_plan.ts (the layers' records, the files to read),
// content_read.ts (the files parsed), advisory_match.ts (packages against advisories),
// report_store.ts (the report written and pointed at); image_report.ts is the report's shape.
import type { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import { isPermanent, type JobContext, type JobQueues, PermanentJobError } from "../jobs/mod.ts";
import type { Registry } from "../registry/mod.ts";
import { type BlobStore, readVerified } from "../storage/mod.ts";
import {
  errorText,
  type LayerIndexReader,
  type LayerReader,
  type ListedEntry,
  MachineFailureError,
  machineMessage,
  tarLayers,
} from "../index/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import { parseManifest } from "../oci/mod.ts";
import type { ScanConfig } from "../config/mod.ts";
import { log } from "../log.ts";
import { builtOnFailedParses } from "./machine_stale.ts";
import type { AdvisoryStore } from "./advisory_store.ts";
import type { ScanRecord, ScanRecords } from "./scan_records.ts";
import type { ImageReport } from "./image_report.ts";
import { layerRecords, planFiles } from "./image_plan.ts";
import { type Planned, readContent } from "./content_read.ts";
import { matchAdvisories, sortFindings, uncheckedReason, zeroCounts } from "./advisory_match.ts";
import { storeReport } from "./report_store.ts";

const MAX_CONFIG = 8 << 20;
/** 50,000 findings make a ~25 MB report, read back and rendered in ~0.3 s. */
const MAX_FINDINGS = 50_000;

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
    await storeReport(this.records, this.files, p.namespace, p.digest, report, fx);
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
    const recs = await layerRecords(this.deps, layers, signal);
    const sizes = await Promise.all(layers.map(async (d) => (await this.blobs.blob(d))?.size ?? 0));
    for (let i = 0; i < layers.length; i++) {
      if (recs[i].state !== "ready") {
        warnings.push(`layer ${layers[i]} is ${recs[i].state}: ${recs[i].error ?? ""}`.trim());
      }
    }
    const scanPlan = await planFiles(this.reader, this.opts, recs, warnings, signal);
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
    const content = await readContent(this.opts, planned, pythonPaths, signal);
    warnings.push(...content.warnings);
    const adv = await this.advisories.meta();
    const matched = adv
      ? await matchAdvisories(this.advisories, adv, content.os, content.packages)
      : [];
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
}
