// The advisory index: OSV records from `[scan] advisories_dir`, one KV entry per (advisory,
// package) under a snapshot id, so a scan reads only the packages it has (one bounded `list`
// per package) and several processes share one load. A load writes a whole new snapshot, then
// switches the pointer in one commit, then deletes the old snapshot: a scan running meanwhile
// keeps reading the snapshot it started with.
import { join, relative } from "node:path";
import { createHash } from "node:crypto";
import { type Affected, OsvError, parseOsv } from "./osv.ts";
import { zipMembers, zipRead, ZipWindow } from "./zip.ts";
import { Scavenger } from "../streams/mod.ts";
import { K, keySize, KV_LIMITS } from "../kv/mod.ts";
import { normalizePypiName } from "./language_pkgs.ts";

/**
 * The name entries are stored and looked up under: PyPI's normalised project name (OSV writes
 * `Django`, a wheel's metadata directory `django` or `Django`), others as published.
 */
export function lookupName(ecosystem: string, name: string): string {
  return ecosystem === "PyPI" ? normalizePypiName(name) : name;
}

export interface AdvisoryMeta {
  snapshot: string;
  /** digest of the files' names, sizes and mtimes: a change means reload */
  fingerprint: string;
  loaded_at: number;
  load_ms: number;
  records: number;
  affected: number;
  ecosystems: Record<string, number>;
  /** the first problems met (unreadable files, bad records) */
  errors: string[];
  error_count: number;
}

export const metaKey: Deno.KvKey = K.advisoryMeta();

const MAX_RECORD_BYTES = 4 << 20;
const MAX_FILES = 4_000_000;
const MAX_ERRORS_KEPT = 20;
/** KV's value limit is 64 KiB; an entry past this loses its one-by-one version list. */
const MAX_VALUE = 60 * 1024;
/** A commit of sets stays well inside 1,000 mutations and 800 KiB. */
const BATCH_MUTATIONS = 500;
/** Longest entry key stored (KV's own limit is 2,048 bytes). */
const MAX_KEY = 1800;
const BATCH_BYTES = 600 * 1024;

interface SourceFile {
  path: string;
  size: number;
  mtime: number;
}

/** The advisory files under `dir`: `*.json` and `*.zip`, at most 4 levels down. */
async function sourceFiles(dir: string): Promise<SourceFile[]> {
  const out: SourceFile[] = [];
  const walk = async (d: string, depth: number) => {
    let names: Deno.DirEntry[] = [];
    try {
      for await (const e of Deno.readDir(d)) names.push(e);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound && d !== dir) return;
      throw e;
    }
    names = names.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of names) {
      if (out.length >= MAX_FILES) return;
      const p = join(d, e.name);
      if (e.isDirectory && depth < 4) await walk(p, depth + 1);
      else if (e.isFile && /\.(json|zip)$/i.test(e.name)) {
        const st = await Deno.stat(p);
        out.push({ path: p, size: st.size, mtime: st.mtime?.getTime() ?? 0 });
      }
    }
  };
  await walk(dir, 0);
  return out;
}

function fingerprintOf(dir: string, files: SourceFile[]): string {
  const h = createHash("sha256");
  for (const f of files) h.update(`${relative(dir, f.path)}\0${f.size}\0${f.mtime}\n`);
  return h.digest("hex");
}

/** An entry's stored form: small enough for one KV value whatever the record held. */
function stored(a: Affected): Affected {
  let v = a;
  const size = () => JSON.stringify(v).length * 3; // UTF-8 worst case
  if (size() > MAX_VALUE) v = { ...v, versions: [] };
  if (size() > MAX_VALUE) v = { ...v, ranges: v.ranges.slice(0, 50).map((r) => r.slice(0, 50)) };
  if (size() > MAX_VALUE) v = { ...v, references: [], aliases: v.aliases.slice(0, 5) };
  return v;
}

export class AdvisoryStore {
  constructor(private readonly kv: Deno.Kv) {}

  async meta(): Promise<AdvisoryMeta | null> {
    return (await this.kv.get<AdvisoryMeta>(metaKey)).value;
  }

  /** Does `dir` hold other files than the loaded snapshot was made of? */
  async changed(dir: string): Promise<boolean> {
    const cur = await this.meta();
    const files = await sourceFiles(dir);
    // No files and no snapshot: nothing to load (see load).
    if (!cur && files.length === 0) return false;
    return cur?.fingerprint !== fingerprintOf(dir, files);
  }

  /**
   * Loads every record under `dir` into a new snapshot and makes it current. Returns the new
   * meta, or the current one when the files did not change (unless `force`). A directory with
   * no advisory file (a first download that failed offline, or every file removed) leaves no
   * snapshot at all (meta null; a current one is dropped): an empty snapshot would read as
   * advisory data loaded.
   */
  async load(dir: string, opts: { force?: boolean; signal?: AbortSignal } = {}): Promise<
    { meta: AdvisoryMeta | null; loaded: boolean }
  > {
    const started = performance.now();
    const files = await sourceFiles(dir);
    const fingerprint = fingerprintOf(dir, files);
    const current = await this.kv.get<AdvisoryMeta>(metaKey);
    if (current.value && current.value.fingerprint === fingerprint && !opts.force) {
      return { meta: current.value, loaded: false };
    }
    if (files.length === 0) {
      if (!current.value) return { meta: null, loaded: false };
      const r = await this.kv.atomic().check(current).delete(metaKey).commit();
      if (!r.ok) return { meta: await this.meta(), loaded: false };
      await this.dropSnapshot(current.value.snapshot);
      return { meta: null, loaded: true };
    }
    const snapshot = `${Date.now().toString(36)}-${crypto.randomUUID().slice(0, 8)}`;
    const meta: AdvisoryMeta = {
      snapshot,
      fingerprint,
      loaded_at: 0,
      load_ms: 0,
      records: 0,
      affected: 0,
      ecosystems: {},
      errors: [],
      error_count: 0,
    };
    const problem = (msg: string) => {
      meta.error_count++;
      if (meta.errors.length < MAX_ERRORS_KEPT) meta.errors.push(msg.slice(0, 500));
    };
    let op = this.kv.atomic();
    let n = 0;
    let bytes = 0;
    let keyBytes = 0;
    const flush = async () => {
      if (n === 0) return;
      const r = await op.commit();
      if (!r.ok) throw new Error("advisory load commit failed");
      op = this.kv.atomic();
      n = 0;
      bytes = 0;
      keyBytes = 0;
    };
    const add = async (text: string, where: string) => {
      let entries: Affected[];
      try {
        entries = parseOsv(text);
      } catch (e) {
        if (e instanceof OsvError) return problem(`${where}: ${e.message}`);
        throw e;
      }
      meta.records++;
      for (const a of entries) {
        const key = [
          ...K.advisoriesOf(snapshot, a.ecosystem, lookupName(a.ecosystem, a.package)),
          a.id,
        ];
        const k = keySize(key);
        // KV refuses keys past 2 KiB; no real ecosystem, package or id comes near that.
        if (k > MAX_KEY) {
          problem(`${where}: ${a.id.slice(0, 100)}: package or id too long to index`);
          continue;
        }
        const v = stored(a);
        const size = JSON.stringify(v).length * 3 + 2 * k;
        if (
          n + 1 > BATCH_MUTATIONS || bytes + size > BATCH_BYTES ||
          keyBytes + k > KV_LIMITS.keyBytes
        ) await flush();
        op.set(key, v);
        n++;
        bytes += size;
        keyBytes += k;
        meta.affected++;
        meta.ecosystems[a.ecosystem] = (meta.ecosystems[a.ecosystem] ?? 0) + 1;
      }
    };
    const dec = new TextDecoder();
    // Each member leaves an inflated buffer and its JSON behind; V8 frees those late.
    const scavenger = new Scavenger();
    try {
      for (const f of files) {
        opts.signal?.throwIfAborted();
        const rel = relative(dir, f.path);
        if (/\.zip$/i.test(f.path)) {
          let fh: Deno.FsFile | null = null;
          try {
            fh = await Deno.open(f.path);
            const members = await zipMembers(fh, f.size);
            const window = new ZipWindow(fh);
            for (const m of members) {
              opts.signal?.throwIfAborted();
              if (!/\.json$/i.test(m.name)) continue;
              let bytesOf: Uint8Array;
              try {
                bytesOf = await zipRead(window, m, MAX_RECORD_BYTES);
              } catch (e) {
                problem(`${rel}!${m.name}: ${(e as Error).message}`);
                continue;
              }
              scavenger.passed(bytesOf.length * 8);
              await add(dec.decode(bytesOf), `${rel}!${m.name}`);
            }
          } catch (e) {
            if (opts.signal?.aborted) throw e;
            problem(`${rel}: ${(e as Error).message}`);
          } finally {
            fh?.close();
          }
        } else {
          if (f.size > MAX_RECORD_BYTES) {
            problem(`${rel}: ${f.size} bytes (max ${MAX_RECORD_BYTES})`);
            continue;
          }
          let text: string;
          try {
            text = await Deno.readTextFile(f.path);
          } catch (e) {
            problem(`${rel}: ${(e as Error).message}`);
            continue;
          }
          await add(text, rel);
        }
      }
      await flush();
      meta.loaded_at = Date.now();
      meta.load_ms = Math.round(performance.now() - started);
      // Switch only if nobody switched meanwhile; else this snapshot is dropped.
      const r = await this.kv.atomic().check(current).set(metaKey, meta).commit();
      if (!r.ok) {
        await this.dropSnapshot(snapshot);
        const now = await this.meta();
        return { meta: now ?? meta, loaded: false };
      }
    } catch (e) {
      await this.dropSnapshot(snapshot).catch(() => {});
      throw e;
    }
    if (current.value) await this.dropSnapshot(current.value.snapshot);
    return { meta, loaded: true };
  }

  /** Deletes a snapshot's entries, 1,000 keys per commit. */
  async dropSnapshot(snapshot: string): Promise<void> {
    for (;;) {
      const keys: Deno.KvKey[] = [];
      for await (
        const e of this.kv.list({ prefix: K.advisorySnapshot(snapshot) }, { limit: 1000 })
      ) {
        keys.push(e.key);
      }
      if (keys.length === 0) return;
      // Deletes count their keys toward a commit's 800 KiB: long keys take several commits.
      let op = this.kv.atomic();
      let bytes = 0;
      for (const k of keys) {
        const size = keySize(k);
        if (bytes + size > BATCH_BYTES) {
          await op.commit();
          op = this.kv.atomic();
          bytes = 0;
        }
        op.delete(k);
        bytes += size;
      }
      await op.commit();
    }
  }

  /** Every advisory entry for `pkg` in `ecosystem` of `snapshot`. */
  async lookup(snapshot: string, ecosystem: string, pkg: string): Promise<Affected[]> {
    const out: Affected[] = [];
    for await (
      const e of this.kv.list<Affected>({ prefix: K.advisoriesOf(snapshot, ecosystem, pkg) })
    ) {
      out.push(e.value);
    }
    return out;
  }
}
