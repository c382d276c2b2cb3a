// The filesystem an image's layers make together, as a container runtime would see it: layers
// applied in order, a whiteout removing a path (and everything under it) from the layers below,
// an opaque marker emptying a directory of what the layers below put there, and an upper
// non-directory replacing a lower directory with its contents. Built from the layers' index
// listings, top layer first, so an entry is kept only when nothing above hides it.
import type { ListedEntry } from "../index/mod.ts";

export interface MergedEntry {
  /** index of the layer the visible entry comes from (0 = lowest) */
  layer: number;
  entry: ListedEntry;
}

export interface MergeResult {
  /** visible entries by path (whiteout and opaque markers themselves are not entries) */
  files: Map<string, MergedEntry>;
  /** per layer: bytes of its regular files hidden by a later layer (overwritten or deleted) */
  wastedByLayer: number[];
  /** per layer: bytes of its regular files */
  bytesByLayer: number[];
}

/** The parents of `path`, nearest last: `a/b/c` → `a`, `a/b`. */
function* ancestors(path: string): Generator<string> {
  let i = path.indexOf("/");
  while (i > 0) {
    yield path.slice(0, i);
    i = path.indexOf("/", i + 1);
  }
}

/**
 * Merges layers given top-down as entry streams (`layers[0]` is the LOWEST layer, as in the
 * manifest; each is asked for its entries once, highest first). `keep` limits which visible
 * entries are kept in `files` (the others still hide what is below them and count as waste).
 */
export async function mergeLayers(
  layers: Array<() => AsyncIterable<ListedEntry>>,
  keep: (e: ListedEntry) => boolean = () => true,
): Promise<MergeResult> {
  const files = new Map<string, MergedEntry>();
  // Paths any higher layer defines (the upper entry wins), removes with a whiteout or replaces
  // with a non-directory (its subtree goes), and directories made opaque (their lower content
  // goes).
  const defined = new Set<string>();
  const gone = new Set<string>();
  const opaque = new Set<string>();
  const wastedByLayer = new Array<number>(layers.length).fill(0);
  const bytesByLayer = new Array<number>(layers.length).fill(0);
  for (let li = layers.length - 1; li >= 0; li--) {
    const whiteouts: string[] = [];
    const opaques: string[] = [];
    const nonDirs: string[] = [];
    const here: string[] = [];
    for await (const e of layers[li]()) {
      if (e.kind === "whiteout") {
        whiteouts.push(e.path);
        continue;
      }
      if (e.kind === "opaque") {
        opaques.push(e.path);
        continue;
      }
      if (e.kind === "file") bytesByLayer[li] += e.size;
      let hidden = defined.has(e.path) || gone.has(e.path);
      if (!hidden) {
        for (const a of ancestors(e.path)) {
          if (gone.has(a) || opaque.has(a)) {
            hidden = true;
            break;
          }
        }
      }
      if (hidden) {
        if (e.kind === "file") wastedByLayer[li] += e.size;
        continue;
      }
      here.push(e.path);
      if (e.kind !== "dir") nonDirs.push(e.path);
      if (keep(e)) files.set(e.path, { layer: li, entry: e });
    }
    // This layer's own markers act on the layers below only.
    for (const p of here) defined.add(p);
    for (const p of whiteouts) gone.add(p);
    for (const p of nonDirs) gone.add(p);
    for (const p of opaques) opaque.add(p);
  }
  return { files, wastedByLayer, bytesByLayer };
}

/**
 * Resolves symlinks in `path` against the merged tree (absolute targets from the root,
 * relative ones from the link's directory), at most 40 hops as Linux allows. Null when a link
 * loops or leaves the tree.
 */
export function resolvePath(files: Map<string, MergedEntry>, path: string): string | null {
  let parts = path.split("/").filter((p) => p && p !== ".");
  let hops = 0;
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === "..") {
      parts.splice(Math.max(0, i - 1), i > 0 ? 2 : 1);
      i = Math.max(-1, i - 2);
      continue;
    }
    const prefix = parts.slice(0, i + 1).join("/");
    const m = files.get(prefix);
    if (m?.entry.kind !== "symlink") continue;
    if (++hops > 40) return null;
    const target = m.entry.link_target ?? "";
    const base = target.startsWith("/") ? [] : parts.slice(0, i);
    parts = [...base, ...target.split("/").filter((p) => p && p !== "."), ...parts.slice(i + 1)];
    i = -1;
  }
  return parts.join("/");
}
