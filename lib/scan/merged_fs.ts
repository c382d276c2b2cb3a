// The filesystem an image's layers make together, as a container runtime would see it: layers
// applied in order, a whiteout removing a path (and everything under it) from the layers below,
// an opaque marker emptying a directory of what the layers below put there, and an upper
// non-directory replacing a lower directory with its contents. Built from the layers' index
// listings, top layer first, so an entry is kept only when nothing above hides it.
//
// Paths come from pushed layers, so a single one can be a 1 MiB PAX name of 500,000 segments and
// a link target as long: everything here walks a path one segment at a time over a tree of
// nodes keyed by (parent, segment), never re-reading a prefix, so the work is linear in the
// bytes of the paths and targets (comparing or joining prefixes made it quadratic: minutes of
// a blocked event loop for one ~1 KiB layer).
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

/**
 * Path nodes: node 0 is the root, every other node is one segment under its parent. A node's
 * only child is kept as its name and number, without a map (a path of 500,000 segments makes
 * as many nodes); a map of children by name comes with the second child.
 */
class PathTree {
  private count = 1;
  /** what higher layers did to each node (mergeLayers) */
  flags = new Uint8Array(1024);
  private sole = new Int32Array(1024);
  private readonly kids: (string | Map<string, number> | undefined)[] = [undefined];
  /** the directory insert() found last, and its node */
  private lastDir: string | null = null;
  private lastDirNode = 0;

  child(parent: number, segment: string): number {
    const k = this.kids[parent];
    if (typeof k === "string") return k === segment ? this.sole[parent] : -1;
    return k?.get(segment) ?? -1;
  }

  add(parent: number, segment: string): number {
    const k = this.kids[parent];
    if (k === segment) return this.sole[parent];
    const known = typeof k === "object" ? k.get(segment) : undefined;
    if (known !== undefined) return known;
    const id = this.count++;
    if (id === this.flags.length) {
      const flags = new Uint8Array(id * 2);
      flags.set(this.flags);
      this.flags = flags;
      const sole = new Int32Array(id * 2);
      sole.set(this.sole);
      this.sole = sole;
    }
    this.kids.push(undefined);
    if (k === undefined) {
      this.kids[parent] = segment;
      this.sole[parent] = id;
    } else if (typeof k === "string") {
      this.kids[parent] = new Map([[k, this.sole[parent]], [segment, id]]);
    } else k.set(segment, id);
    return id;
  }

  /** The node of `path` (segments split at every `/`), created with its parents as needed. */
  insert(path: string): number {
    const slash = path.lastIndexOf("/");
    if (slash < 0) return this.add(0, path);
    // Entries come grouped by directory: most share the last one's.
    const dir = path.slice(0, slash);
    if (dir !== this.lastDir) {
      let node = 0;
      let start = 0;
      for (;;) {
        const next = dir.indexOf("/", start);
        node = this.add(node, next < 0 ? dir.slice(start) : dir.slice(start, next));
        if (next < 0) break;
        start = next + 1;
      }
      this.lastDir = dir;
      this.lastDirNode = node;
    }
    return this.add(this.lastDirNode, path.slice(slash + 1));
  }
}

// What a higher layer did to a path (node flags).
const DEFINED = 1; // an entry there wins over lower ones
const GONE = 2; // whited out or replaced by a non-directory: it and its subtree go
const OPAQUE = 4; // a directory emptied of lower content

/**
 * Merges layers given top-down as entry streams (`layers[0]` is the LOWEST layer, as in the
 * manifest; each is asked for its entries once, highest first). `keep` limits which visible
 * entries are kept in `files` (the others still hide what is below them and count as waste).
 */
export async function mergeLayers(
  layers: Array<() => AsyncIterable<ListedEntry>>,
  keep: (e: ListedEntry) => boolean = () => true,
): Promise<MergeResult> {
  const files = new MergedFiles();
  const tree = new PathTree();
  const wastedByLayer = new Array<number>(layers.length).fill(0);
  const bytesByLayer = new Array<number>(layers.length).fill(0);
  // The directory of the entry looked at last, its node (-1: not in the tree) and whether it
  // or a parent is gone or opaque; valid within one layer (marks change between layers).
  let lastDir: string | null = null;
  let lastDirNode = 0;
  let lastDirHidden = false;
  const walkDir = (dir: string) => {
    // Parents are the prefixes before each `/`, except that a path opening with `/` (its dir
    // empty or opening with `/`) has none, as the prefix scan this replaced had it; listed
    // paths never open with `/`.
    const ancestors = dir !== "" && dir.charCodeAt(0) !== 0x2f;
    lastDir = dir;
    lastDirNode = 0;
    lastDirHidden = false;
    let start = 0;
    for (;;) {
      const slash = dir.indexOf("/", start);
      lastDirNode = tree.child(lastDirNode, slash < 0 ? dir.slice(start) : dir.slice(start, slash));
      // Nothing was ever recorded at or under a prefix the tree lacks.
      if (lastDirNode < 0) return;
      if (ancestors && (tree.flags[lastDirNode] & (GONE | OPAQUE)) !== 0) {
        lastDirHidden = true;
        return;
      }
      if (slash < 0) return;
      start = slash + 1;
    }
  };
  /** Whether what higher layers did hides `path`: it, or a proper ancestor gone or opaque. */
  const hidden = (path: string): boolean => {
    const slash = path.lastIndexOf("/");
    let dir = 0;
    if (slash >= 0) {
      const d = path.slice(0, slash);
      if (d !== lastDir) walkDir(d);
      if (lastDirHidden) return true;
      if (lastDirNode < 0) return false;
      dir = lastDirNode;
    }
    const node = tree.child(dir, slash < 0 ? path : path.slice(slash + 1));
    return node >= 0 && (tree.flags[node] & (DEFINED | GONE)) !== 0;
  };
  for (let li = layers.length - 1; li >= 0; li--) {
    // This layer's own marks act on the layers below only: applied once it is read, and not
    // kept for the lowest layer (a single layer of a million files built a tree of a million
    // nodes for nothing: 200 MiB and seconds of the serving thread).
    const marks: string[] = [];
    const marked: number[] = [];
    const lowest = li === 0;
    lastDir = null;
    for await (const e of layers[li]()) {
      if (e.kind === "whiteout" || e.kind === "opaque") {
        if (lowest) continue;
        marks.push(e.path);
        marked.push(e.kind === "whiteout" ? GONE : OPAQUE);
        continue;
      }
      if (e.kind === "file") bytesByLayer[li] += e.size;
      if (hidden(e.path)) {
        if (e.kind === "file") wastedByLayer[li] += e.size;
        continue;
      }
      if (!lowest) {
        marks.push(e.path);
        marked.push(e.kind === "dir" ? DEFINED : DEFINED | GONE);
      }
      if (keep(e)) files.set(e.path, { layer: li, entry: e });
    }
    for (let i = 0; i < marks.length; i++) {
      // The entries above came in chunks read from disk; this loop has no I/O of its own.
      if ((i & 4095) === 4095) await nextTask();
      const node = tree.insert(marks[i]);
      tree.flags[node] |= marked[i];
    }
  }
  return { files, wastedByLayer, bytesByLayer };
}

/** Lets timers and I/O run: a loop of a million steps resolves no promise that would. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** The symlinks of a file map as a path tree, each link node with its target. */
interface LinkTree {
  tree: PathTree;
  targets: Map<number, string>;
}

function linkTree(files: Map<string, MergedEntry>): LinkTree {
  const tree = new PathTree();
  const targets = new Map<number, string>();
  for (const [path, m] of files) {
    if (m.entry.kind === "symlink") targets.set(tree.insert(path), m.entry.link_target ?? "");
  }
  return { tree, targets };
}

/**
 * The map mergeLayers returns: a Map whose link tree is built on the first resolvePath and kept
 * until the map changes, so resolving many paths costs the tree once.
 */
class MergedFiles extends Map<string, MergedEntry> {
  private links: LinkTree | null = null;

  override set(key: string, value: MergedEntry): this {
    this.links = null;
    return super.set(key, value);
  }

  override delete(key: string): boolean {
    this.links = null;
    return super.delete(key);
  }

  override clear(): void {
    this.links = null;
    super.clear();
  }

  linkTree(): LinkTree {
    return this.links ??= linkTree(this);
  }
}

/** Linux follows at most 40 links in one lookup. */
const MAX_HOPS = 40;
/**
 * Segments and target bytes one resolution may go through. A link target can be ~1 MiB (the
 * PAX cap), so 40 hops alone could mean tens of millions of steps; a real lookup takes a few
 * dozen, and one pass over the longest possible target fits easily.
 */
const MAX_RESOLVE_WORK = 4 * 1024 * 1024;

/** The non-empty, non-`.` segments of `p`, last first (the order they are popped in). */
function pushSegments(p: string, into: string[]): void {
  let end = p.length;
  while (end > 0) {
    const slash = p.lastIndexOf("/", end - 1);
    const s = p.slice(slash + 1, end);
    if (s && s !== ".") into.push(s);
    end = slash < 0 ? 0 : slash;
  }
}

/**
 * Resolves symlinks in `path` against the merged tree (absolute targets from the root,
 * relative ones from the link's directory), at most 40 hops as Linux allows; `..` at the root
 * stays at the root, so a result never leaves the tree. Null when a link loops, or the lookup
 * would take more than MAX_RESOLVE_WORK steps. Linear in the bytes of `path` and the targets
 * followed (the link tree of a plain Map is built for each call; mergeLayers' map keeps it).
 */
export function resolvePath(files: Map<string, MergedEntry>, path: string): string | null {
  const { tree, targets } = files instanceof MergedFiles ? files.linkTree() : linkTree(files);
  // The resolved directory so far (segments and their tree nodes, -1 off the link tree) and
  // what is left to walk, next segment last.
  const segments: string[] = [];
  const nodes: number[] = [];
  const todo: string[] = [];
  pushSegments(path, todo);
  let work = todo.length;
  let hops = 0;
  while (todo.length) {
    if (++work > MAX_RESOLVE_WORK) return null;
    const s = todo.pop()!;
    if (s === "..") {
      segments.pop();
      nodes.pop();
      continue;
    }
    const parent = nodes.length ? nodes[nodes.length - 1] : 0;
    const node = parent < 0 ? -1 : tree.child(parent, s);
    const target = node < 0 ? undefined : targets.get(node);
    if (target === undefined) {
      segments.push(s);
      nodes.push(node);
      continue;
    }
    if (++hops > MAX_HOPS) return null;
    work += target.length;
    if (work > MAX_RESOLVE_WORK) return null;
    if (target.startsWith("/")) {
      segments.length = 0;
      nodes.length = 0;
    }
    pushSegments(target, todo);
  }
  return segments.join("/");
}
