// The image's merged filesystem for the explorer: every path any layer names, with each layer's
// version of it and, for a version a later layer hid, which layer did and how (overwritten, or
// removed by a whiteout, an opaque marker or a non-directory replacing a directory). The rules are
// the runtime's, as lib/scan/merged_fs.ts applies them for the reports and the image diff: layers
// in order, a layer's markers acting on the layers below it only. Built in one pass over the
// listings with a path → node map, so a 100k-entry listing takes a few tens of milliseconds.

export type EntryKind =
  | "file"
  | "dir"
  | "symlink"
  | "hardlink"
  | "whiteout"
  | "opaque"
  | "other";

export interface Secret {
  kind: string;
  line: number;
}

export interface LayerEntry {
  path: string;
  kind: EntryKind;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  offset?: number;
  link_target?: string;
  capabilities?: string[];
  content?: {
    sha256: string;
    sha512?: string;
    mime_type: string;
    secrets?: Secret[];
  };
}

export interface LayerListing {
  entries: LayerEntry[];
  partial?: boolean;
  error?: string;
  refreshing?: boolean;
}

/** How a later layer hid a version. `updated`: a directory's metadata replaced, its content kept. */
export type HiddenHow = "overwritten" | "removed" | "updated";

export interface Version {
  /** 0-based layer index (L1 is 0) */
  layer: number;
  entry: LayerEntry;
  /** the 0-based layer that hid this version, -1 while it is visible */
  hiddenBy: number;
  how: HiddenHow | null;
}

export interface FsNode {
  path: string;
  name: string;
  parent: FsNode | null;
  depth: number;
  children: FsNode[] | null;
  /** children in display order, made when first needed */
  sorted: FsNode[] | null;
  /** versions in layer order; empty for a directory only implied by its descendants' paths */
  versions: Version[];
  /** the last layer that removed the node's subtree (whiteout, opaque parent, replacement), or -1 */
  removedBy: number;
  /** layers holding an opaque marker for this directory */
  opaqueIn: readonly number[];
  /** layers holding a whiteout naming this path */
  whiteoutIn: readonly number[];
  /** visible in the merged image (a live version, or a live descendant) */
  present: boolean;
}

/** A layer the tree lacks, and why (the server's reason). */
export interface Unlisted {
  layer: number;
  error: string;
  kind: "unlisted" | "unavailable";
  /** `unavailable`: the seconds the server said to wait before asking again */
  retryAfter?: number;
}

export interface MergedTree {
  root: FsNode;
  byPath: Map<string, FsNode>;
  layerCount: number;
  /** entries over all layers */
  entryCount: number;
  /** listings that were cut short by the indexer (`partial`), with their error */
  partial: { layer: number; error: string }[];
  /**
   * layers with no listing, and why: `unlisted` (a 404 from the entries endpoint: not a tar, over
   * a budget, …) or `unavailable` (a 503: indexing could not run on this machine, retried)
   */
  unlisted: Unlisted[];
  /** regular files visible in the image */
  visibleFiles: number;
  /** bytes of regular files a later layer overwrote or removed (as `wasted` adds them up) */
  wasteBytes: number;
  /** milliseconds the merge took (most of it while the listings downloaded) */
  mergeMs: number;
}

// Shared by the nodes no marker names (nearly all): one empty array instead of 200k.
const NONE: readonly number[] = Object.freeze([]);

function newNode(path: string, name: string, parent: FsNode | null): FsNode {
  return {
    path,
    name,
    parent,
    depth: parent ? parent.depth + 1 : -1,
    children: null,
    sorted: null,
    versions: [],
    removedBy: -1,
    opaqueIn: NONE,
    whiteoutIn: NONE,
    present: false,
  };
}

/** The visible version of a node, if any (at most one: the last not hidden). */
export function liveVersion(n: FsNode): Version | null {
  const v = n.versions[n.versions.length - 1];
  return v && v.hiddenBy < 0 ? v : null;
}

export function isDirNode(n: FsNode): boolean {
  const v = n.versions[n.versions.length - 1];
  return !v || v.entry.kind === "dir" ||
    (n.children !== null && n.children.length > 0);
}

/** Hides what layers below `layer` put at `n` and under it (a layer's markers never hide its own). */
function hideSubtree(n: FsNode, layer: number) {
  const stack = [n];
  while (stack.length) {
    const x = stack.pop()!;
    x.removedBy = layer;
    for (const v of x.versions) {
      if (v.hiddenBy < 0 && v.layer < layer) {
        v.hiddenBy = layer;
        v.how = "removed";
      }
    }
    if (x.children) { for (const c of x.children) stack.push(c); }
  }
}

/**
 * Builds the merged tree a batch of entries at a time, so the merge can run while the listings
 * download. Batches of a layer come in tar order, and every batch of the layers below it first.
 * Markers only hide versions of lower layers, so a whiteout or opaque marker acts the same
 * wherever its layer's tar puts it.
 */
export class TreeBuilder {
  readonly root = newNode("", "", null);
  readonly byPath = new Map<string, FsNode>([["", this.root]]);
  entryCount = 0;
  readonly partial: { layer: number; error: string }[] = [];
  readonly unlisted: Unlisted[] = [];
  /** milliseconds spent merging */
  ms = 0;

  constructor(readonly layerCount: number) {
    this.root.children = [];
  }

  private nodeOf(path: string): FsNode {
    let n = this.byPath.get(path);
    if (n) return n;
    const cut = path.lastIndexOf("/");
    const parent = cut < 0 ? this.root : this.nodeOf(path.slice(0, cut));
    n = newNode(path, cut < 0 ? path : path.slice(cut + 1), parent);
    (parent.children ??= []).push(n);
    parent.sorted = null;
    this.byPath.set(path, n);
    return n;
  }

  add(li: number, entries: LayerEntry[]) {
    const t0 = performance.now();
    this.entryCount += entries.length;
    for (const e of entries) {
      if (e.path === "") continue;
      if (e.kind === "whiteout") {
        const n = this.nodeOf(e.path);
        n.whiteoutIn = [...n.whiteoutIn, li];
        hideSubtree(n, li);
        continue;
      }
      if (e.kind === "opaque") {
        const n = this.nodeOf(e.path);
        n.opaqueIn = [...n.opaqueIn, li];
        if (n.children) { for (const c of n.children) hideSubtree(c, li); }
        continue;
      }
      const n = this.nodeOf(e.path);
      const prev = n.versions[n.versions.length - 1];
      if (prev && prev.hiddenBy < 0) {
        const bothDirs = prev.entry.kind === "dir" && e.kind === "dir";
        prev.hiddenBy = li;
        prev.how = bothDirs ? "updated" : "overwritten";
        // A non-directory replacing a directory takes the directory's content with it.
        if (!bothDirs && prev.entry.kind === "dir" && n.children) {
          for (const c of n.children) hideSubtree(c, li);
        }
      }
      n.versions.push({ layer: li, entry: e, hiddenBy: -1, how: null });
    }
    this.ms += performance.now() - t0;
  }

  /** A layer's listing was cut short by the indexer. */
  markPartial(li: number, error: string) {
    this.partial.push({ layer: li, error });
  }

  /**
   * A layer has no listing: none at all (not a tar, over the index limits), or none yet because
   * indexing could not run (`unavailable`); why.
   */
  markUnlisted(
    li: number,
    error: string,
    kind: Unlisted["kind"] = "unlisted",
    retryAfter?: number,
  ) {
    this.unlisted.push({
      layer: li,
      error,
      kind,
      ...(retryAfter !== undefined ? { retryAfter } : {}),
    });
  }

  finish(): MergedTree {
    const t0 = performance.now();
    const counts = markPresent(this.root);
    this.ms += performance.now() - t0;
    const { root, byPath, layerCount, entryCount, partial, unlisted } = this;
    return { root, byPath, layerCount, entryCount, partial, unlisted, ...counts, mergeMs: this.ms };
  }
}

export function buildTree(listings: LayerListing[]): MergedTree {
  const b = new TreeBuilder(listings.length);
  listings.forEach((l, li) => {
    b.add(li, l.entries);
    if (l.partial) b.markPartial(li, l.error ?? "partial listing");
  });
  return b.finish();
}

/**
 * Post-order: a node is present with a live version or a present descendant. The same walk counts
 * the image's visible files and its waste, so the summary costs no second pass over 100k nodes.
 */
function markPresent(root: FsNode): { visibleFiles: number; wasteBytes: number } {
  const order: FsNode[] = [];
  const stack = [root];
  let visibleFiles = 0;
  let wasteBytes = 0;
  while (stack.length) {
    const x = stack.pop()!;
    order.push(x);
    if (x.children) { for (const c of x.children) stack.push(c); }
  }
  for (let i = order.length - 1; i >= 0; i--) {
    const x = order[i];
    for (const v of x.versions) {
      if (v.entry.kind !== "file") continue;
      if (v.hiddenBy < 0) visibleFiles++;
      else if (v.hiddenBy > v.layer && v.how !== "updated") wasteBytes += v.entry.size;
    }
    if (
      liveVersion(x) ||
      (x.versions.length === 0 && x.removedBy < 0 && x.whiteoutIn.length === 0)
    ) {
      x.present = true;
    }
    if (x.present && x.parent) x.parent.present = true;
  }
  root.present = true;
  return { visibleFiles, wasteBytes };
}

/** Children in display order: directories first, then by name in code-point order. */
export function sortedChildren(n: FsNode): FsNode[] {
  if (n.sorted) return n.sorted;
  if (!n.children) return (n.sorted = []);
  const dirs: FsNode[] = [];
  const rest: FsNode[] = [];
  for (const c of n.children) (isDirNode(c) ? dirs : rest).push(c);
  const by = (
    a: FsNode,
    b: FsNode,
  ) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  dirs.sort(by);
  rest.sort(by);
  return (n.sorted = dirs.concat(rest));
}

/** One line of the tree: a node and one of its versions (null for an implied directory). */
export interface Row {
  node: FsNode;
  version: Version | null;
  /** the node's main line (the one carrying the expand toggle); others are hidden versions */
  primary: boolean;
  /** in a layer focus: what the focused layer did to this line */
  change?: "added" | "changed" | "removed" | "emptied";
}

/** The version a node's main line shows: the visible one, else the newest. */
export function primaryVersion(n: FsNode): Version | null {
  return n.versions[n.versions.length - 1] ?? null;
}

/**
 * The rows a node contributes: its hidden non-directory versions (struck through in the view)
 * before its main line, so a file overwritten in L2 reads `L1 (overwritten by L2)` then `L2`.
 */
function nodeRows(
  n: FsNode,
  focus: number | null,
  out: Row[],
  ancestorOnly: boolean,
) {
  const main = primaryVersion(n);
  if (focus === null || ancestorOnly) {
    for (const v of n.versions) {
      if (v === main || v.how === "updated") continue;
      if (!ancestorOnly) out.push({ node: n, version: v, primary: false });
    }
    out.push({ node: n, version: main, primary: true });
    return;
  }
  let mainPushed = false;
  const before = out.length;
  for (const v of n.versions) {
    if (v.layer === focus) {
      const prev = n.versions[n.versions.indexOf(v) - 1];
      const changed = prev && prev.hiddenBy === focus && prev.how !== "removed";
      out.push({
        node: n,
        version: v,
        primary: v === main,
        change: changed ? "changed" : "added",
      });
      if (v === main) mainPushed = true;
    } else if (v.hiddenBy === focus && v.how === "removed") {
      out.push({ node: n, version: v, primary: v === main, change: "removed" });
      if (v === main) mainPushed = true;
    }
  }
  // The main line only when the focused layer left nothing else here, or for a directory's
  // toggle: a file the layer removed and a later layer re-added shows as removed only.
  if (!mainPushed && (out.length === before || (isDirNode(n) && n.children !== null))) {
    const emptied = n.opaqueIn.includes(focus);
    out.push({
      node: n,
      version: main,
      primary: true,
      change: emptied ? "emptied" : undefined,
    });
  }
}

/** Whether a node has something to show in a layer focus (its own lines, not its descendants). */
export function touchedBy(n: FsNode, focus: number): boolean {
  if (n.opaqueIn.includes(focus) || n.whiteoutIn.includes(focus)) return true;
  for (const v of n.versions) {
    if (v.layer === focus || (v.hiddenBy === focus && v.how === "removed")) {
      return true;
    }
  }
  return false;
}

export interface FlattenOptions {
  expanded: Set<FsNode>;
  /** 0-based layer to focus on, or null for the whole image */
  focus: number | null;
  /** lower-case path substring, or "" */
  filter: string;
}

/**
 * The tree's lines in display order. Without focus or filter: the expanded directories' children.
 * With either: the nodes that match and their ancestors, every such ancestor open.
 */
export function flatten(tree: MergedTree, o: FlattenOptions): Row[] {
  const out: Row[] = [];
  if (o.focus === null && !o.filter) {
    const walk = (n: FsNode) => {
      for (const c of sortedChildren(n)) {
        nodeRows(c, null, out, false);
        if (o.expanded.has(c) && c.children) walk(c);
      }
    };
    walk(tree.root);
    return out;
  }
  // match: the node itself matches; keep: it or a descendant does
  const keep = new Set<FsNode>();
  const match = new Set<FsNode>();
  for (const n of tree.byPath.values()) {
    if (n === tree.root) continue;
    if (o.filter && !n.path.toLowerCase().includes(o.filter)) continue;
    if (o.focus !== null && !touchedBy(n, o.focus)) continue;
    match.add(n);
    for (let x: FsNode | null = n; x && !keep.has(x); x = x.parent) keep.add(x);
  }
  const walk = (n: FsNode) => {
    for (const c of sortedChildren(n)) {
      if (!keep.has(c)) continue;
      nodeRows(c, o.focus, out, !match.has(c));
      if (c.children) walk(c);
    }
  };
  walk(tree.root);
  return out;
}

/** Every version of a regular file that a later layer overwrote or removed: the image's waste. */
export function wasted(
  tree: MergedTree,
): { total: number; rows: Version[]; paths: string[] } {
  const rows: Version[] = [];
  const paths: string[] = [];
  let total = 0;
  for (const n of tree.byPath.values()) {
    for (const v of n.versions) {
      if (
        v.entry.kind === "file" && v.hiddenBy > v.layer && v.how !== "updated"
      ) {
        rows.push(v);
        paths.push(n.path);
        total += v.entry.size;
      }
    }
  }
  const order = rows.map((_, i) => i).sort((a, b) =>
    rows[b].entry.size - rows[a].entry.size || (paths[a] < paths[b] ? -1 : 1)
  );
  return {
    total,
    rows: order.map((i) => rows[i]),
    paths: order.map((i) => paths[i]),
  };
}

export interface Finding {
  node: FsNode;
  version: Version;
}

/** Files any layer holds with credentials in them (a removed file still ships in its layer). */
export function secretFiles(tree: MergedTree): Finding[] {
  const out: Finding[] = [];
  for (const n of tree.byPath.values()) {
    for (const v of n.versions) {
      if (v.entry.content?.secrets?.length) out.push({ node: n, version: v });
    }
  }
  return out.sort((a, b) =>
    (a.node.path < b.node.path ? -1 : 1) || a.version.layer - b.version.layer
  );
}

export const SETUID = 0o4000, SETGID = 0o2000, STICKY = 0o1000;

/** What makes an entry's permissions notable, as short labels; empty when nothing does. */
export function permissionFlags(e: LayerEntry): string[] {
  const f: string[] = [];
  if (e.kind === "symlink" || e.kind === "whiteout" || e.kind === "opaque") {
    return f;
  }
  if (e.mode & SETUID) f.push("setuid");
  if (e.mode & SETGID) f.push("setgid");
  if (e.capabilities?.length) f.push("capabilities");
  if (e.mode & 0o002) {
    f.push(
      e.kind === "dir" && e.mode & STICKY ? "world-writable (sticky)" : "world-writable",
    );
  }
  return f;
}

export function permissionFindings(tree: MergedTree): Finding[] {
  const out: Finding[] = [];
  for (const n of tree.byPath.values()) {
    for (const v of n.versions) {
      if (permissionFlags(v.entry).length) out.push({ node: n, version: v });
    }
  }
  return out.sort((a, b) =>
    (a.node.path < b.node.path ? -1 : 1) || a.version.layer - b.version.layer
  );
}

/** `ls -l` style mode string. */
export function modeString(e: LayerEntry): string {
  const t = e.kind === "dir" ? "d" : e.kind === "symlink" ? "l" : e.kind === "hardlink" ? "h" : "-";
  const m = e.mode;
  const r = (bit: number, ch: string) => (m & bit ? ch : "-");
  const x = (bit: number, special: number, on: string, off: string) =>
    m & special ? (m & bit ? on : off) : m & bit ? "x" : "-";
  return t + r(0o400, "r") + r(0o200, "w") + x(0o100, SETUID, "s", "S") +
    r(0o040, "r") + r(0o020, "w") + x(0o010, SETGID, "s", "S") +
    r(0o004, "r") + r(0o002, "w") + x(0o001, STICKY, "t", "T");
}

export function formatSize(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024, u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}
