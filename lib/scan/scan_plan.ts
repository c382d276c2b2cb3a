// Which files of an image a report reads: its layers' listings merged into the filesystem a
// container would see, then the package databases, status.d files, npm lockfiles and Python
// metadata paths found there, symlinks resolved. The listings hold names from pushed content
// and an image may list millions of entries (a 7 MB layer of a million empty files), so the
// scan job runs this in a sandbox (plan_child.ts) when an image is large: merging a million
// entries took 2 s and 100-200 MiB, and two such layers 17 s and 280 MiB.
import type { ListedEntry } from "../index/mod.ts";
import { mergeLayers, resolvePath } from "./merged_fs.ts";
import { MAX_LOCKFILES, npmLockfiles } from "./language_pkgs.ts";
import { PACKAGE_DB_PATHS, STATUS_D_PREFIX } from "./package_dbs.ts";

/** A file the report will parse: where it shows in the image, and its visible listing entry. */
export interface PlannedFile {
  path: string;
  kind: "database" | "lockfile";
  /** index of the layer it comes from (0 = lowest) */
  layer: number;
  /** the listing entry (a hardlink is followed by the caller, which can read listings) */
  entry: ListedEntry;
}

export interface ScanPlan {
  files: PlannedFile[];
  pythonPaths: string[];
  warnings: string[];
}

const DB_BASENAMES = new Set(PACKAGE_DB_PATHS.map((p) => p.slice(p.lastIndexOf("/") + 1)));
const PY_META_PATH = /(^|\/)(site|dist)-packages\/[^/]+\.(dist|egg)-info(\/|$)/;
const LOCKFILE_NAMES = new Set(["package-lock.json", ".package-lock.json"]);

/** Kept by the merge: what the plan may need (the other entries only hide lower ones). */
function wanted(e: ListedEntry): boolean {
  const base = e.path.slice(e.path.lastIndexOf("/") + 1);
  return e.kind === "symlink" || DB_BASENAMES.has(base) || LOCKFILE_NAMES.has(base) ||
    e.path.startsWith(STATUS_D_PREFIX) || PY_META_PATH.test(e.path);
}

/**
 * The plan for an image whose layers (lowest first) are given as entry streams, each asked for
 * once, highest first. `maxPackages` bounds the status.d files and Python paths (each is at
 * least one package, and the parse stops at that many anyway).
 */
export async function planImage(
  layers: Array<() => AsyncIterable<ListedEntry>>,
  maxPackages: number,
): Promise<ScanPlan> {
  const merged = await mergeLayers(layers, wanted);
  const files: PlannedFile[] = [];
  const warnings: string[] = [];
  const plan = (path: string, kind: PlannedFile["kind"]) => {
    const real = resolvePath(merged.files, path);
    if (real === null) return;
    const m = merged.files.get(real);
    if (!m || (m.entry.kind !== "file" && m.entry.kind !== "hardlink")) return;
    files.push({ path, kind, layer: m.layer, entry: m.entry });
  };
  for (const path of PACKAGE_DB_PATHS) plan(path, "database");
  const pythonPaths: string[] = [];
  let statusFiles = 0;
  for (const [path, m] of merged.files) {
    if (path.startsWith(STATUS_D_PREFIX) && m.entry.kind === "file") {
      if (++statusFiles <= maxPackages) plan(path, "database");
    }
    if (PY_META_PATH.test(path) && pythonPaths.length < maxPackages * 4) pythonPaths.push(path);
  }
  if (statusFiles > maxPackages) {
    warnings.push(`${statusFiles} files in ${STATUS_D_PREFIX}: the first ${maxPackages} are read`);
  }
  const lockfiles = npmLockfiles(merged.files.keys());
  if (lockfiles.length > MAX_LOCKFILES) {
    warnings.push(`${lockfiles.length} npm lockfiles: the first ${MAX_LOCKFILES} are read`);
  }
  for (const path of lockfiles.slice(0, MAX_LOCKFILES)) plan(path, "lockfile");
  return { files, pythonPaths, warnings };
}
