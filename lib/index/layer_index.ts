// The layer index's service (SPEC §Layer listing, Layer entries 1–4, Layer file 1–7, §Layer
// file details): the `index-layer` job's handler, `reindex`, the heal pass, and the reads behind
// the three endpoints; and forgetting a layer's index when scrub reclaims its bytes. A layer whose
// indexing could not run (the machine failed, not the layer) answers 503 until a retry lists it
// (machine_failure.ts).
import type { Config } from "../config/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import {
  notApplicable,
  parseManifest,
  rangeNotSatisfiable,
  RegistryError,
  resolveRange,
  truncate,
  unavailable,
} from "../oci/mod.ts";
import type { BlobMeta, ManifestMeta, SvcMeta } from "../metadata/mod.ts";
import {
  BatchRun,
  type JobContext,
  type JobQueues,
  keyTime,
  PermanentJobError,
  type ProgressSink,
  type Runs,
} from "../jobs/mod.ts";
import type { Registry } from "../registry/mod.ts";
import { INDEX_KIND, indexLayerJob, tarLayers } from "./layer_jobs.ts";
import { commitIndexRecord } from "./indexer.ts";
import { walkSandboxed } from "./sandboxed_walk.ts";
import { listingDocument } from "./listing_document.ts";
import type { IndexRecords } from "./index_records.ts";
import {
  INDEX_VERSION,
  type IndexRecord,
  LayerReader,
  listed,
  type ListedEntry,
  readAllStream,
  runBase,
} from "./layer_store.ts";
import { isElf, readElf } from "./elf.ts";
import { fileIndexCurrent, forgetLayer, writeFileIndex } from "./file_search.ts";
import { beginMarkers, hasCertificate, type PemBlock, pemBlocks } from "./pem.ts";
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import { log } from "../log.ts";
import {
  errorText,
  isLayerError,
  isMachineError,
  machineFailure,
  MachineFailureError,
  machineMessage,
  settled,
  unavailableRecord,
} from "./machine_failure.ts";
import { healLayers, type HealResult } from "./layer_heal.ts";
import { catalogWalk } from "./catalog_walk.ts";

const CERT_HEAD = 64 * 1024;
/** PEM blocks parsed in the serving process (~0.5 ms each); more go to a sandbox. */
const INLINE_PEM_BLOCKS = 32;
const DETAILS_WALL_SECS = 60;
const DETAILS_CHILD = new URL("./details_child.ts", import.meta.url);
const CERT_MAX = 4 * 1024 * 1024;
/** Retry-After of a 503 while a layer's index job backs off: its wait, within these bounds. */
const RETRY_AFTER_MAX_SECS = 300;
/** Retry-After of a details request whose sandbox could not run (no job: the client retries). */
const DETAILS_RETRY_SECS = 5;

export type EntriesAnswer =
  | { status: 202 }
  | {
    status: 200;
    refreshing: boolean;
    record: IndexRecord;
    /** the listing JSON, streamed; gzip-encoded when `gzipped` */
    body: ReadableStream<Uint8Array>;
    gzipped: boolean;
    /** the body's length when known */
    length?: number;
  };

export interface FileAnswer {
  entry: ListedEntry;
  /** the size of the served part */
  length: number;
  range: { start: number; end: number } | null;
  body: ReadableStream<Uint8Array>;
}

/**
 * Everything derived from a layer whose bytes scrub is reclaiming: its file-search keys, its
 * index record and its listing, checkpoints and side copy. Idempotent (a scrub killed half-way
 * repeats it).
 */
export async function forgetLayerIndex(
  records: IndexRecords,
  store: BlobStore,
  digest: string,
): Promise<void> {
  const rec = await records.get(digest);
  await forgetLayer(records, new LayerReader(store), digest, rec);
  await records.delete(digest);
  const [alg, hex] = digest.split(":");
  if (alg && hex && /^[a-z0-9]+$/.test(alg) && /^[a-f0-9]+$/.test(hex)) {
    await store.deleteDerived(`index/${alg}/${hex}`);
  }
}

/**
 * What other folders ask the layer index of a layer (the scan, the image diff): its current record
 * and, when that will not do, its index job queued. The records themselves stay the index's.
 */
export interface LayerIndexReader {
  /** the layer's record; null when it was never indexed */
  record(digest: string): Promise<IndexRecord | null>;
  /** queues the layer's index job (one pending per layer: one already pending stays) */
  queueIndex(digest: string): Promise<void>;
}

/** What the layer index works with, handed in by the composition root (lib/services). */
export interface LayerIndexDeps {
  cfg: Config;
  /** its own records: index records and file-search keys (index_records.ts) */
  records: IndexRecords;
  /** blob records and links: whether a layer is stored, and which namespaces own it */
  blobs: Pick<BlobMeta, "blob" | "link">;
  /** `reindex`: the namespaces of the category index, and each one's revisions */
  catalog: Pick<SvcMeta, "indexed">;
  revisions: Pick<ManifestMeta, "revisions">;
  /** `reindex`'s run record, which the Jobs page shows (lib/jobs/progress.ts) */
  runs: Pick<Runs, "start">;
  /** the layers' bytes and the derived files of their runs */
  store: BlobStore;
  /** the `index` queue: its handler here, and the jobs a listing request queues */
  jobs: Pick<JobQueues, "handle" | "queue">;
  /** manifest bodies, for `reindex` to find the layers */
  manifests: Pick<Registry["manifests"], "body">;
  /** a pull-through namespace's layer, fetched from its upstream before it is indexed */
  upstream: Pick<Registry, "readBlob"> & {
    pullThrough: Pick<Registry["pullThrough"], "repository">;
  };
}

export class LayerIndex implements LayerIndexReader {
  private readonly cfg: Config;
  private readonly records: IndexRecords;
  private readonly store: BlobStore;
  private readonly jobs: LayerIndexDeps["jobs"];
  private readonly manifests: LayerIndexDeps["manifests"];
  private readonly upstream: LayerIndexDeps["upstream"];
  private readonly blobs: LayerIndexDeps["blobs"];
  private readonly catalog: LayerIndexDeps["catalog"];
  private readonly revisions: LayerIndexDeps["revisions"];
  private readonly runs: LayerIndexDeps["runs"];
  readonly reader: LayerReader;
  /**
   * Index jobs of this process that failed for a machine reason since it started: a heal pass
   * runs again after one (lib/services/heal.ts).
   */
  machineFailures = 0;

  constructor(deps: LayerIndexDeps) {
    this.cfg = deps.cfg;
    this.records = deps.records;
    this.store = deps.store;
    this.jobs = deps.jobs;
    this.manifests = deps.manifests;
    this.upstream = deps.upstream;
    this.blobs = deps.blobs;
    this.catalog = deps.catalog;
    this.revisions = deps.revisions;
    this.runs = deps.runs;
    this.reader = new LayerReader(this.store);
  }

  register(): void {
    this.jobs.handle("index", INDEX_KIND, (job) => this.run(job));
  }

  async run(job: JobContext): Promise<void> {
    const p = job.payload as { digest?: unknown; force?: unknown } | null;
    const digest = p?.digest;
    if (typeof digest !== "string") throw new PermanentJobError("payload needs a digest");
    try {
      await this.index(digest, p?.force === true, job.signal);
    } catch (e) {
      if (isLayerError(e)) throw e;
      // The machine's failure, not the layer's: no verdict is recorded, the job backs off.
      const cause = errorText(e);
      const message = machineMessage(`index of ${digest}`, cause);
      log.warn(message, { digest });
      this.machineFailures++;
      // A stop (shutdown, a lost lease) leaves the job to be taken up again, and says nothing.
      if (!job.signal.aborted) {
        await this.recordUnavailable(digest, cause).catch((err) =>
          log.warn("could not record an index failure", { digest, error: errorText(err) })
        );
      }
      throw new MachineFailureError(message, { cause: e });
    }
  }

  /** `unavailable` with the cause, unless the layer has a listing or a verdict to keep. */
  private async recordUnavailable(digest: string, cause: string): Promise<void> {
    const cur = await this.records.read(digest);
    const rec = unavailableRecord(cur.value, cause);
    if (rec) await this.records.replaceIf(cur, rec);
  }

  private async index(digest: string, force: boolean, signal: AbortSignal): Promise<void> {
    const current = await this.records.get(digest);
    if (current && settled(current) && !force) {
      // Layers listed before the file index existed get it now (a no-op once written).
      if (listed(current)) await writeFileIndex(this.records, this.reader, digest, current, signal);
      return;
    }
    const blob = await this.blobs.blob(digest);
    if (!blob) throw new PermanentJobError(`blob ${digest} is not stored`);
    const base = runBase(digest, current?.base);
    const r = await commitIndexRecord({
      records: this.records,
      store: this.store,
      digest,
      result: await walkSandboxed({
        limits: this.cfg.global.index,
        store: this.store,
        digest,
        size: blob.size,
        base,
        signal,
        blobStore: this.cfg.blobStore,
      }),
    });
    // A budget passed: the layer answers UNSUPPORTED with the budget named, and the job fails
    // at once (the same bytes would pass it again).
    if (r.failure) throw new PermanentJobError(r.failure.message);
    // What was listed is searchable, a partial listing's files included.
    if (listed(r.record)) await writeFileIndex(this.records, this.reader, digest, r.record, signal);
    // A partial listing is served; the job still ends with the reason, for the failed list.
    if (r.record.state === "partial") throw new PermanentJobError(r.error ?? "partial listing");
  }

  /**
   * `main.ts reindex`: queues every tar layer of every stored image (of `namespace` only, when
   * given) that has no current index (all of them with `force`); a layer whose indexing could
   * not run (machine_failure.ts, older versions' records included) has none. The jobs queued
   * form one batch whose progress the Jobs page shows (lib/jobs/progress.ts). Returns how many
   * were (or would be) queued.
   */
  async reindex(
    opts: {
      dryRun?: boolean;
      force?: boolean;
      namespace?: string;
      report?: (line: string) => void;
      progress?: ProgressSink;
      /** why it runs, as the run's record says */
      cause?: string;
    } = {},
  ): Promise<{ namespaces: number; layers: number; queued: number }> {
    const seen = new Set<string>();
    let queued = 0;
    let namespaces = 0;
    const batch = new BatchRun(
      this.runs,
      this.jobs,
      "reindex",
      `${opts.force ? "every layer" : "layers without a current index"} of ${
        opts.namespace ? `namespace ${opts.namespace}` : "every namespace"
      }`,
      opts.cause ?? "reindex command",
    );
    const note = () => `${seen.size} layer(s), ${queued} ${opts.dryRun ? "to queue" : "queued"}`;
    let step = { index: 0, total: opts.namespace ? 1 : null as number | null };
    const report = () =>
      opts.progress?.({ unit: "namespaces", done: step.index, total: step.total, note: note() });
    try {
      for await (const w of catalogWalk(this.catalog, opts.namespace)) {
        step = w;
        namespaces++;
        for await (const { digest, rec } of this.revisions.revisions(w.ns)) {
          let parsed;
          try {
            parsed = parseManifest(await this.manifests.body(digest, rec), rec.mediaType);
          } catch {
            continue;
          }
          for (const layer of tarLayers(parsed)) {
            if (seen.has(layer)) continue;
            seen.add(layer);
            report();
            const cur = await this.record(layer);
            // A current listing whose file index is older is queued too: the job only rewrites
            // the file index (its version bumps when its key layout grows).
            if (
              !opts.force && cur && settled(cur) &&
              (!listed(cur) || await fileIndexCurrent(this.records, layer))
            ) continue;
            if (!(await this.blobs.blob(layer))) continue;
            queued++;
            opts.report?.(`index ${layer} (${w.ns})`);
            if (!opts.dryRun) {
              await batch.enqueue({
                ...indexLayerJob(layer),
                payload: { digest: layer, force: opts.force === true },
              });
            }
          }
        }
        step = { index: w.index + 1, total: w.total };
        report();
      }
      await batch.finish();
    } finally {
      await batch.stop();
    }
    return { namespaces, layers: seen.size, queued };
  }

  /**
   * Queues again (bounded) the layers whose indexing could not run, and the index jobs that
   * failed so (layer_heal.ts): at the start of a process that runs index jobs, and after machine
   * failures.
   */
  heal(opts: { limit: number; signal?: AbortSignal }): Promise<HealResult> {
    return healLayers(
      { records: this.records, blobs: this.blobs, queue: this.jobs.queue("index") },
      opts,
    );
  }

  private async enqueue(digest: string): Promise<string> {
    return (await this.jobs.queue("index").enqueue(indexLayerJob(digest))).storageKey;
  }

  /**
   * 503 for a layer whose indexing could not run, once an index job is pending for it; Retry-After
   * is that job's wait (its backoff).
   */
  private async unavailable(digest: string, cause: string): Promise<RegistryError> {
    const due = keyTime(await this.enqueue(digest));
    const secs = Math.min(RETRY_AFTER_MAX_SECS, Math.max(1, Math.ceil((due - Date.now()) / 1000)));
    return unavailable(`${digest}: indexing could not run: ${cause}; it is retried`, secs);
  }

  /** The namespace owns the layer (else 404); a pull-through namespace fetches it first. */
  private async owned(ns: string, digest: string): Promise<"owned" | "fetching"> {
    if (await this.blobs.link(ns, digest)) return "owned";
    if (this.upstream.pullThrough.repository(ns)) {
      // Rule 2: a HEAD proves the upstream has it; the fill runs behind the 202.
      await this.upstream.readBlob(ns, digest, null, false);
      const r = await this.upstream.readBlob(ns, digest, null, true);
      r.stream?.pipeTo(new WritableStream()).catch(() => {});
      return "fetching";
    }
    throw new RegistryError("BLOB_UNKNOWN", `${digest} is not a layer of ${truncate(ns)}`);
  }

  record(digest: string): Promise<IndexRecord | null> {
    return this.records.get(digest);
  }

  async queueIndex(digest: string): Promise<void> {
    await this.enqueue(digest);
  }

  /** The listing of `digest` for `ns`; gzip-encoded when the client takes `gzip`. */
  async entries(ns: string, digest: string, gzip = false): Promise<EntriesAnswer> {
    // Rule 2: the fill runs behind the 202; a later request finds the layer owned and
    // queues the index job.
    if (await this.owned(ns, digest) === "fetching") return { status: 202 };
    const rec = await this.record(digest);
    if (!rec) {
      await this.enqueue(digest);
      return { status: 202 };
    }
    const broken = machineFailure(rec);
    if (broken !== null) throw await this.unavailable(digest, broken);
    if (rec.state === "unsupported") {
      throw notApplicable(`${digest} cannot be listed: ${rec.error}`);
    }
    const refreshing = rec.version < INDEX_VERSION;
    if (refreshing) await this.enqueue(digest);
    return {
      status: 200,
      refreshing,
      record: rec,
      ...await listingDocument(this.store, rec, refreshing, gzip),
    };
  }

  /** A regular file of an indexed layer (a hard link serves its target). */
  async file(
    ns: string,
    digest: string,
    path: string,
    rangeHeader: string | null,
  ): Promise<FileAnswer> {
    const { rec, entry, size } = await this.locate(ns, digest, path);
    const r = resolveRange(rangeHeader, entry.size);
    if (r.kind === "unsatisfiable") {
      throw rangeNotSatisfiable(entry.size);
    }
    const [start, end] = r.kind === "partial" ? [r.start, r.end] : [0, entry.size - 1];
    const body = await this.reader.read(
      digest,
      size,
      rec,
      entry.offset + start,
      entry.offset + end,
    );
    return {
      entry,
      length: Math.max(0, end - start + 1),
      range: r.kind === "partial" ? { start, end } : null,
      body,
    };
  }

  /** SPEC §Layer file details: `{elf}`, `{certificates}` or `{}`. */
  async details(ns: string, digest: string, path: string): Promise<Record<string, unknown>> {
    const { rec, entry, size } = await this.locate(ns, digest, path);
    const readAt = async (offset: number, length: number) => {
      if (offset >= entry.size || length <= 0) return new Uint8Array(0);
      const end = Math.min(entry.size, offset + length) - 1;
      return await readAllStream(
        await this.reader.read(digest, size, rec, entry.offset + offset, entry.offset + end),
      );
    };
    const head = await readAt(0, Math.min(entry.size, CERT_HEAD));
    if (isElf(head)) {
      const elf = await readElf(readAt, entry.size);
      return elf ? { elf } : {};
    }
    if (!hasCertificate(head)) return {};
    const bytes = entry.size <= CERT_HEAD ? head : await readAt(0, CERT_MAX);
    // A few certificates parse in milliseconds here; a bundle goes to a sandbox.
    const ix = this.cfg.global.index;
    if (ix.sandbox === "off" || beginMarkers(bytes) <= INLINE_PEM_BLOCKS) {
      return { certificates: pemBlocks(head, bytes) ?? [] };
    }
    const certs = await runSandboxedJson<PemBlock[] | null>({
      mode: ix.sandbox,
      label: "details",
      module: DETAILS_CHILD,
      args: null,
      stdin: ReadableStream.from([bytes]),
      budget: { ...ix.budget, wallSecs: Math.min(ix.budget.wallSecs, DETAILS_WALL_SECS) },
    }).catch((e) => {
      // A budget, a dead sandbox or the child's own error is the file's verdict: 404, not 500.
      if (isSandboxVerdict(e)) {
        throw notApplicable(`${truncate(path)}: no details: ${e.message}`);
      }
      // No sandbox could run it: the machine's trouble, not the file's.
      if (isMachineError(e)) {
        log.warn(machineMessage(`details of ${digest}`, errorText(e)), { digest });
        throw unavailable(
          `${truncate(path)}: details could not run: ${errorText(e)}; retry later`,
          DETAILS_RETRY_SECS,
        );
      }
      throw e;
    });
    return { certificates: certs ?? [] };
  }

  private async locate(ns: string, digest: string, path: string) {
    if (!(await this.blobs.link(ns, digest))) {
      throw new RegistryError("BLOB_UNKNOWN", `${digest} is not a layer of ${truncate(ns)}`);
    }
    const rec = await this.record(digest);
    const broken = machineFailure(rec);
    if (broken !== null) throw await this.unavailable(digest, broken);
    if (!rec || !listed(rec)) {
      throw new RegistryError("NAME_UNKNOWN", `layer ${digest} is not indexed`);
    }
    let entry = await this.reader.entry(rec, path);
    for (let hops = 0; entry?.kind === "hardlink" && hops < 8; hops++) {
      entry = await this.reader.entry(rec, entry.link_target ?? "");
    }
    if (!entry || entry.kind !== "file") {
      throw new RegistryError("NAME_UNKNOWN", `${truncate(path)} is not a file of ${digest}`);
    }
    const blob = await this.blobs.blob(digest);
    if (!blob) throw new RegistryError("BLOB_UNKNOWN", digest);
    return { rec, entry, size: blob.size };
  }
}
