// Two images compared by their merged filesystems (docs/api.md#image-diff): paths added,
// removed and modified (size, mode, link target or content by sha256), each with the layer it
// comes from; and per image the bytes wasted on files a later layer overwrote or deleted, with
// an efficiency score as dive defines it (the share of file bytes still visible). A layer that
// is not fully indexed is named with its state on its side: what it holds was not compared.
import type { ListedEntry } from "../index/mod.ts";
import type { MergeResult } from "./merged_fs.ts";

/** A layer of a side whose listing is missing or incomplete: its files were not compared. */
export interface UnindexedLayer {
  digest: string;
  /** the index record's state (`partial`, `unsupported`, …), or `not-stored` */
  state: string;
  /** the indexer's reason, when it gave one */
  error?: string;
}

export interface DiffSide {
  digest: string;
  layers: string[];
  /** layers not fully indexed (any state but ready): the diff is incomplete when any is named */
  unindexed: UnindexedLayer[];
  /** every path the merged filesystem shows: files, directories, links, devices */
  files: number;
  /** the regular files among them (what the UI's Filesystem tab counts as "files in the image") */
  regular_files: number;
  /** bytes of regular files in all layers */
  total_bytes: number;
  /** bytes of regular files hidden by a later layer */
  wasted_bytes: number;
  /** 1 - wasted / total (1 for an image without files) */
  efficiency: number;
}

export interface DiffEntry {
  path: string;
  kind: string;
  size: number;
  mode: number;
  sha256?: string;
  link_target?: string;
  /** the layer digest the visible entry comes from */
  layer: string;
}

export interface ImageDiff {
  from: DiffSide;
  to: DiffSide;
  added: DiffEntry[];
  removed: DiffEntry[];
  modified: { path: string; changes: string[]; from: DiffEntry; to: DiffEntry }[];
  /** a list was cut at `limit` entries */
  truncated: boolean;
  /**
   * every layer of both images was fully indexed: only then do empty lists mean the two
   * filesystems are the same
   */
  complete: boolean;
}

/** What the diff knows of an image besides its merged listing. */
export interface SideInfo {
  digest: string;
  layers: string[];
  unindexed?: UnindexedLayer[];
}

export function side(
  { digest, layers, unindexed = [] }: SideInfo,
  m: MergeResult,
): DiffSide {
  const total = m.bytesByLayer.reduce((a, b) => a + b, 0);
  const wasted = m.wastedByLayer.reduce((a, b) => a + b, 0);
  let regular = 0;
  for (const f of m.files.values()) if (f.entry.kind === "file") regular++;
  return {
    digest,
    layers,
    unindexed,
    files: m.files.size,
    regular_files: regular,
    total_bytes: total,
    wasted_bytes: wasted,
    efficiency: total === 0 ? 1 : Math.round((1 - wasted / total) * 10000) / 10000,
  };
}

function entry(e: ListedEntry, layer: string): DiffEntry {
  return {
    path: e.path,
    kind: e.kind,
    size: e.size,
    mode: e.mode,
    ...(e.content?.sha256 ? { sha256: e.content.sha256 } : {}),
    ...(e.link_target !== undefined ? { link_target: e.link_target } : {}),
    layer,
  };
}

function changes(a: ListedEntry, b: ListedEntry): string[] {
  const out: string[] = [];
  if (a.kind !== b.kind) out.push("kind");
  if (a.size !== b.size) out.push("size");
  if (a.mode !== b.mode) out.push("mode");
  if ((a.link_target ?? null) !== (b.link_target ?? null)) out.push("link_target");
  if (a.kind === "file" && b.kind === "file" && a.content?.sha256 !== b.content?.sha256) {
    out.push("content");
  }
  if (a.uid !== b.uid || a.gid !== b.gid) out.push("owner");
  return out;
}

export function diffImages(
  from: SideInfo & { merged: MergeResult },
  to: SideInfo & { merged: MergeResult },
  limit: number,
): ImageDiff {
  const added: DiffEntry[] = [], removed: DiffEntry[] = [];
  const modified: ImageDiff["modified"] = [];
  let truncated = false;
  const push = <T>(list: T[], v: T) => {
    if (list.length < limit) list.push(v);
    else truncated = true;
  };
  const a = from.merged.files, b = to.merged.files;
  for (const path of [...new Set([...a.keys(), ...b.keys()])].sort()) {
    const x = a.get(path), y = b.get(path);
    if (x && !y) push(removed, entry(x.entry, from.layers[x.layer]));
    else if (!x && y) push(added, entry(y.entry, to.layers[y.layer]));
    else if (x && y) {
      const c = changes(x.entry, y.entry);
      if (c.length) {
        push(modified, {
          path,
          changes: c,
          from: entry(x.entry, from.layers[x.layer]),
          to: entry(y.entry, to.layers[y.layer]),
        });
      }
    }
  }
  const sides = [side(from, from.merged), side(to, to.merged)];
  return {
    from: sides[0],
    to: sides[1],
    added,
    removed,
    modified,
    truncated,
    complete: sides.every((s) => s.unindexed.length === 0),
  };
}
