// Downloads osv.dev's per-ecosystem dumps (`<base>/<Ecosystem>/all.zip`) into an advisories
// directory, for the `fetch-advisories` job and `main.ts advisories fetch`. Each file is asked for
// conditionally (the ETag and Last-Modified of the copy held), written to `all.zip.part` and
// resumed from there after a cut (Range with If-Range), then verified (its length, the MD5 the
// bucket announces in x-goog-hash, and every member inflating to its declared size) before one
// rename puts it in place: a truncated or corrupt download never replaces a good file, so the
// snapshot loaded from the previous one keeps serving.
//
// What was fetched from where is kept beside each file in `all.zip.fetch` (JSON, but not named
// `.json`, so the loader does not read it as an advisory): a machine without Wharf's metadata
// (the connected side of an offline site) needs no database to fetch conditionally.
import { join } from "node:path";
import { createHash } from "node:crypto";
import { Transport } from "../upstream/mod.ts";
import { isEcosystemName } from "../config/mod.ts";
import { zipMembers, zipRead, ZipWindow } from "./zip.ts";
import type { ProgressSink } from "../jobs/mod.ts";

export const ZIP_NAME = "all.zip";
const STATE_SUFFIX = ".fetch";
const PART_SUFFIX = ".part";
/** Members past this are left to the loader (which refuses them) rather than inflated here. */
const VERIFY_MEMBER_MAX = 16 << 20;
const CONNECT_TIMEOUT_MS = 30_000;
const READ_TIMEOUT_MS = 120_000;

/** `<Ecosystem>/all.zip.fetch`: the copy held, and the last attempt. */
export interface FetchState {
  url: string;
  etag: string | null;
  last_modified: string | null;
  /** bytes of the copy held */
  size: number | null;
  /** when the copy held was written (ms) */
  fetched_at: number | null;
  /** when the source last answered (200, 206 or 304) */
  checked_at: number | null;
  /** the last attempt's failure; null once one succeeds */
  error: string | null;
  failed_at: number | null;
}

/** `all.zip.part.fetch`: what the partial file is a prefix of. */
interface PartState {
  url: string;
  etag: string | null;
  last_modified: string | null;
  /** the whole file's length, when the source said */
  total: number | null;
  /** base64 MD5 of the whole file (GCS's x-goog-hash), when the source said */
  md5: string | null;
}

export type FetchOutcome =
  | { ecosystem: string; result: "updated"; bytes: number; resumedFrom: number }
  | { ecosystem: string; result: "unchanged" }
  | { ecosystem: string; result: "failed"; error: string; keptBytes: number };

export interface FetchOptions {
  /** `[scan] advisories_url` */
  baseUrl: string;
  dir: string;
  /** PEM of extra CAs (`[scan] advisories_ca_bundle`, already read) */
  caCerts?: string[];
  /** `[global] outbound_allow` */
  outboundAllow?: readonly string[];
  signal?: AbortSignal;
  connectTimeoutMs?: number;
  readTimeoutMs?: number;
  /** ecosystems done of those asked for, and the current download's bytes */
  progress?: ProgressSink;
}

export function ecosystemUrl(baseUrl: string, ecosystem: string): URL {
  return new URL(`${baseUrl.replace(/\/+$/, "")}/${encodeURIComponent(ecosystem)}/${ZIP_NAME}`);
}

const stateFile = (dir: string, eco: string) => join(dir, eco, ZIP_NAME + STATE_SUFFIX);
const partFile = (dir: string, eco: string) => join(dir, eco, ZIP_NAME + PART_SUFFIX);
const partStateFile = (dir: string, eco: string) => partFile(dir, eco) + STATE_SUFFIX;

async function readJson<T>(path: string): Promise<T | null> {
  try {
    return JSON.parse(await Deno.readTextFile(path)) as T;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof SyntaxError) return null;
    throw e;
  }
}

/** Written beside and renamed over, so a reader never sees half of it. */
async function writeJson(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify(value, null, 2) + "\n");
  await Deno.rename(tmp, path);
}

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

async function removeIfThere(path: string): Promise<void> {
  await Deno.remove(path).catch((e) => {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  });
}

export async function readFetchState(dir: string, ecosystem: string): Promise<FetchState | null> {
  return await readJson<FetchState>(stateFile(dir, ecosystem));
}

/** The ecosystems `dir` holds a dump of, or a record of trying to fetch one. */
export async function ecosystemsIn(dir: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (!e.isDirectory || !isEcosystemName(e.name)) continue;
      const zip = await sizeOf(join(dir, e.name, ZIP_NAME));
      if (zip !== null || (await readFetchState(dir, e.name)) !== null) out.push(e.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out.sort();
}

/** The base64 MD5 of `x-goog-hash: crc32c=…,md5=…`, or null. */
function announcedMd5(res: Response): string | null {
  const h = res.headers.get("x-goog-hash");
  const m = h ? /(?:^|,)\s*md5=([A-Za-z0-9+/=]{24})\s*(?:,|$)/.exec(h) : null;
  return m ? m[1] : null;
}

/** `bytes <start>-<end>/<total>` of a 206, or null. */
function contentRange(res: Response): { start: number; total: number | null } | null {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get("content-range") ?? "");
  if (!m) return null;
  return { start: Number(m[1]), total: m[3] === "*" ? null : Number(m[3]) };
}

async function md5Of(path: string): Promise<string> {
  const h = createHash("md5");
  using f = await Deno.open(path);
  for await (const c of f.readable) h.update(c);
  return h.digest("base64");
}

/** Throws unless `path` is a whole zip whose every member inflates to its declared size. */
export async function verifyZip(path: string, signal?: AbortSignal): Promise<number> {
  using f = await Deno.open(path);
  const size = (await f.stat()).size;
  const members = await zipMembers(f, size);
  const window = new ZipWindow(f);
  for (const m of members) {
    signal?.throwIfAborted();
    if (m.size > VERIFY_MEMBER_MAX) continue;
    const bytes = await zipRead(window, m, VERIFY_MEMBER_MAX);
    if (bytes.length !== m.size) {
      throw new Error(`${m.name}: ${bytes.length} bytes inflated, ${m.size} declared`);
    }
  }
  return members.length;
}

class Corrupt extends Error {}

/** One source of dumps: a transport (guard, CA bundle, timeouts) and the directory they go to. */
export class AdvisoryFetcher {
  private readonly transport: Transport;
  /** the ecosystem fetchAll is on, for the progress of its bytes */
  private step = { ecosystem: "", done: 0, total: 0 };

  constructor(private readonly opts: FetchOptions) {
    this.transport = new Transport({
      upstream: opts.baseUrl,
      label: `advisories ${opts.baseUrl}`,
      connectTimeoutMs: opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      readTimeoutMs: opts.readTimeoutMs ?? READ_TIMEOUT_MS,
      maxRedirects: 5,
      caCerts: opts.caCerts,
      outboundAllow: opts.outboundAllow,
    });
  }

  close(): void {
    this.transport.close();
  }

  /** Fetches each ecosystem in turn; one failing does not stop the others. */
  async fetchAll(ecosystems: string[]): Promise<FetchOutcome[]> {
    const out: FetchOutcome[] = [];
    for (const e of ecosystems) {
      this.opts.signal?.throwIfAborted();
      this.tell(e, out.length, ecosystems.length, 0, null);
      out.push(await this.fetch(e));
    }
    return out;
  }

  private tell(
    ecosystem: string,
    done: number,
    total: number,
    bytes: number,
    bytesTotal: number | null,
  ): void {
    this.step = { ecosystem, done, total };
    this.opts.progress?.({ phase: ecosystem, unit: "ecosystems", done, total, bytes, bytesTotal });
  }

  async fetch(ecosystem: string): Promise<FetchOutcome> {
    if (!isEcosystemName(ecosystem)) {
      return { ecosystem, result: "failed", error: "not an OSV ecosystem name", keptBytes: 0 };
    }
    const { dir } = this.opts;
    await Deno.mkdir(join(dir, ecosystem), { recursive: true });
    const state = await readFetchState(dir, ecosystem);
    try {
      // A source that ignores or refuses our Range gets one fresh request.
      let r = await this.attempt(ecosystem, state, true);
      if (r === "restart") r = await this.attempt(ecosystem, state, false);
      if (r === "restart") throw new Error("the source kept refusing the range asked for");
      return r;
    } catch (e) {
      this.opts.signal?.throwIfAborted();
      const error = e instanceof Corrupt
        ? `download refused: ${e.message}`
        : e instanceof Error
        ? e.message
        : String(e);
      await writeJson(
        stateFile(dir, ecosystem),
        {
          ...(state ?? emptyState(ecosystemUrl(this.opts.baseUrl, ecosystem).href)),
          error: error.slice(0, 1000),
          failed_at: Date.now(),
        } satisfies FetchState,
      );
      return {
        ecosystem,
        result: "failed",
        error,
        keptBytes: (await sizeOf(partFile(dir, ecosystem))) ?? 0,
      };
    }
  }

  private async attempt(
    ecosystem: string,
    state: FetchState | null,
    mayResume: boolean,
  ): Promise<FetchOutcome | "restart"> {
    const { dir } = this.opts;
    const url = ecosystemUrl(this.opts.baseUrl, ecosystem);
    const target = join(dir, ecosystem, ZIP_NAME);
    const part = partFile(dir, ecosystem);
    const partState = await readJson<PartState>(partStateFile(dir, ecosystem));
    const partSize = (await sizeOf(part)) ?? 0;
    const headers: Record<string, string> = {};
    const resumeFrom = mayResume && partState?.url === url.href && partSize > 0 &&
        (partState.etag ?? partState.last_modified)
      ? partSize
      : 0;
    if (resumeFrom > 0) {
      headers["range"] = `bytes=${resumeFrom}-`;
      headers["if-range"] = (partState!.etag ?? partState!.last_modified)!;
    } else if (state?.url === url.href && (await sizeOf(target)) !== null) {
      if (state.etag) headers["if-none-match"] = state.etag;
      if (state.last_modified) headers["if-modified-since"] = state.last_modified;
    }
    const what = `GET ${ecosystem} advisories`;
    const ex = await this.transport.send({ method: "GET", url, headers, what });
    const res = ex.response;
    const now = Date.now();
    const conditional = "if-none-match" in headers || "if-modified-since" in headers;
    if (res.status === 304 && state && conditional) {
      await ex.discard();
      await writeJson(
        stateFile(dir, ecosystem),
        {
          ...state,
          checked_at: now,
          error: null,
          failed_at: null,
        } satisfies FetchState,
      );
      return { ecosystem, result: "unchanged" };
    }
    if (res.status === 416 || (res.status === 206 && resumeFrom === 0)) {
      await ex.discard();
      await this.dropPart(ecosystem);
      return "restart";
    }
    if (res.status !== 200 && res.status !== 206) {
      await ex.discard();
      throw this.transport.statusError(what, res);
    }
    let offset = 0;
    let meta: PartState;
    if (res.status === 206) {
      const range = contentRange(res);
      if (!range || range.start !== resumeFrom) {
        await ex.discard();
        await this.dropPart(ecosystem);
        return "restart";
      }
      offset = resumeFrom;
      meta = {
        ...partState!,
        total: range.total ?? partState!.total,
        md5: announcedMd5(res) ?? partState!.md5,
      };
    } else {
      const length = res.headers.get("content-length");
      meta = {
        url: url.href,
        etag: res.headers.get("etag"),
        last_modified: res.headers.get("last-modified"),
        total: length !== null && /^\d+$/.test(length) ? Number(length) : null,
        md5: announcedMd5(res),
      };
    }
    // The validator goes down before the bytes: a part is only ever resumed against the
    // version it is a prefix of.
    await writeJson(partStateFile(dir, ecosystem), meta);
    {
      using f = await Deno.open(part, { write: true, create: true, truncate: offset === 0 });
      if (offset > 0) await f.seek(offset, Deno.SeekMode.Start);
      // A cut leaves what arrived in the part for the next attempt to resume.
      let got = offset;
      for await (const chunk of ex.body()) {
        this.opts.signal?.throwIfAborted();
        for (let off = 0; off < chunk.length;) off += await f.write(chunk.subarray(off));
        got += chunk.length;
        const { ecosystem: e, done, total } = this.step;
        if (e === ecosystem) this.tell(e, done, total, got, meta.total);
      }
    }
    const got = (await sizeOf(part)) ?? 0;
    try {
      if (meta.total !== null && got !== meta.total) {
        throw new Corrupt(`${got} bytes received, ${meta.total} announced`);
      }
      if (meta.md5 !== null) {
        const md5 = await md5Of(part);
        if (md5 !== meta.md5) throw new Corrupt(`MD5 ${md5}, the source announced ${meta.md5}`);
      }
      try {
        await verifyZip(part, this.opts.signal);
      } catch (e) {
        this.opts.signal?.throwIfAborted();
        throw new Corrupt(`not a whole zip: ${e instanceof Error ? e.message : e}`);
      }
    } catch (e) {
      // Resuming a corrupt prefix would only make it longer.
      if (e instanceof Corrupt) await this.dropPart(ecosystem);
      throw e;
    }
    await Deno.rename(part, target);
    await writeJson(
      stateFile(dir, ecosystem),
      {
        url: url.href,
        etag: meta.etag,
        last_modified: meta.last_modified,
        size: got,
        fetched_at: now,
        checked_at: now,
        error: null,
        failed_at: null,
      } satisfies FetchState,
    );
    await removeIfThere(partStateFile(dir, ecosystem));
    return { ecosystem, result: "updated", bytes: got, resumedFrom: offset };
  }

  private async dropPart(ecosystem: string): Promise<void> {
    await removeIfThere(partFile(this.opts.dir, ecosystem));
    await removeIfThere(partStateFile(this.opts.dir, ecosystem));
  }
}

function emptyState(url: string): FetchState {
  return {
    url,
    etag: null,
    last_modified: null,
    size: null,
    fetched_at: null,
    checked_at: null,
    error: null,
    failed_at: null,
  };
}
