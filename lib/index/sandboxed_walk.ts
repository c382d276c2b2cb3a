// The index walk as the serving process runs it: in a sandbox process (walk_child.ts) under the
// `[global.index]` budgets. Its derived files come back through a scratch folder and become the
// store's only once the walk ended well; a walk that passed a budget, or was killed for it,
// leaves nothing behind and ends in an `unsupported` record that names the budget.
import { join } from "node:path";
import type { BlobStoreConfig, IndexConfig } from "../config/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import {
  BudgetExceededError,
  ChildError,
  runSandboxedJson,
  SandboxError,
  type SandboxSpec,
} from "../sandbox/mod.ts";
import { type IndexResult, unsupportedResult, walkLayer, type WalkOptions } from "./indexer.ts";
import { type IndexRecord, readAllStream } from "./layer_store.ts";
import { findLibraryPaths } from "./native_libs.ts";
import type { WalkArgs } from "./walk_child.ts";
import { detectCompression } from "./layer_decode.ts";
import { IndexError } from "./walk_errors.ts";

const CHILD = new URL("./walk_child.ts", import.meta.url);
/** The walk's decoder worker is a module of this folder, loaded at run time: code, no data. */
const CODE = new URL(".", import.meta.url).pathname.replace(/\/$/, "");

interface ChildResult {
  record: IndexRecord;
  error?: string;
  budget?: { budget: string; limit: number; reached: string };
}

async function* filesUnder(dir: string, rel = ""): AsyncGenerator<string> {
  for await (const e of Deno.readDir(join(dir, rel))) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory) yield* filesUnder(dir, r);
    else if (e.isFile) yield r;
  }
}

function budgetRecord(base: string, e: BudgetExceededError | SandboxError): IndexResult {
  return unsupportedResult(base, e.message, null, e);
}

/**
 * A blob the walk would refuse from its first KiB alone (too large, empty, not a tar in any of
 * the three encodings) needs no sandbox: that verdict is a constant amount of work, and many
 * pushed blobs are not layers at all (artifacts, test data), each of which would otherwise cost
 * a process start.
 */
async function endsAtTheHead(
  store: BlobStore,
  digest: string,
  size: number,
  limits: IndexConfig,
): Promise<boolean> {
  if (size === 0 || size > limits.maxLayerSize) return true;
  const head = await readAllStream(
    await store.read(digest, { start: 0, end: Math.min(size, 1024) - 1 }),
  );
  return detectCompression(head) === "not-tar";
}

/** Runs walk_child.ts and reads its outcome: a record, or a budget or dead sandbox as one. */
async function walkInChild(
  limits: IndexConfig,
  args: WalkArgs,
  io: Pick<SandboxSpec, "readPaths" | "writePaths" | "ffi" | "stdin" | "signal">,
): Promise<IndexResult> {
  let out: ChildResult;
  try {
    out = await runSandboxedJson<ChildResult>({
      mode: limits.sandbox === "worker" ? "worker" : "process",
      label: "index",
      module: CHILD,
      args,
      budget: limits.budget,
      ...io,
    });
  } catch (e) {
    if (e instanceof BudgetExceededError) return budgetRecord(args.base, e);
    // A walk that kills its sandbox would kill the next one too: the layer says why (and a
    // request for its entries does not queue it again).
    if (e instanceof SandboxError) return budgetRecord(args.base, e);
    if (e instanceof ChildError) throw new IndexError(e.message, e.permanent);
    throw e;
  }
  if (out.budget) {
    return budgetRecord(
      args.base,
      new BudgetExceededError(out.budget.budget, out.budget.limit, out.budget.reached),
    );
  }
  return { record: out.record, error: out.error };
}

export interface SandboxedWalkOptions extends Omit<WalkOptions, "inflater" | "rereadable"> {
  store: BlobStore;
  /** the store's config, for a worker to open it (`sandbox = "worker"`) */
  blobStore?: BlobStoreConfig;
}

/** Walks `digest` into the run slot `base` (sandboxed unless `limits.sandbox` is "off"). */
export async function walkSandboxed(o: SandboxedWalkOptions): Promise<IndexResult> {
  const { limits, store, digest, size, base, signal, blobStore } = o;
  const here = () => walkLayer({ limits, store, digest, size, base, signal });
  if (limits.sandbox === "off" || await endsAtTheHead(store, digest, size, limits)) {
    return await here();
  }
  if (limits.sandbox === "worker" && blobStore) {
    // A worker shares this process's permissions: it opens the store itself and writes the run's
    // slot directly (no disk is needed, which Deno Deploy has none of); a run that ends badly
    // has its slot cleared here.
    await store.deleteDerived(base);
    const r = await walkInChild(
      limits,
      { limits, digest, size, base, blobStore, libs: findLibraryPaths() },
      { signal },
    ).catch(async (e) => {
      await store.deleteDerived(base).catch(() => {});
      throw e;
    });
    if (r.record.state === "unsupported") await store.deleteDerived(base).catch(() => {});
    return r;
  }
  const local = store.localScratch?.();
  let root: string;
  try {
    root = local ?? await Deno.makeTempDir({ prefix: "wharf-walk-" });
  } catch (e) {
    // No disk to write to at all (Deno Deploy): the walk writes straight to the store, in this
    // process. Its parsers' own limits hold; the wall, CPU and memory budgets do not.
    if (!(e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied)) {
      throw e;
    }
    return await here();
  }
  const scratch = join(root, crypto.randomUUID());
  await Deno.mkdir(scratch, { recursive: true });
  try {
    await store.deleteDerived(base);
    const blobPath = store.localPath?.(digest);
    const libs = findLibraryPaths();
    const r = await walkInChild(limits, { limits, digest, size, base, blobPath, scratch, libs }, {
      readPaths: [...(blobPath ? [blobPath] : []), scratch, CODE],
      writePaths: [scratch],
      ffi: Object.keys(libs).length > 0,
      stdin: blobPath ? undefined : await store.read(digest),
      signal,
    });
    const out = r.record;
    if (out.state !== "unsupported") {
      // The child's scratch store keeps derived files where an FsBlobStore does.
      const derived = join(scratch, "derived");
      for await (const name of filesUnder(derived)) {
        const path = join(derived, name);
        if (store.adoptDerived) await store.adoptDerived(name, path);
        else await store.writeDerived(name, (await Deno.open(path, { read: true })).readable);
      }
    }
    return r;
  } finally {
    await Deno.remove(local ? scratch : root, { recursive: true }).catch(() => {});
  }
}
