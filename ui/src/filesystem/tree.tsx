// The merged tree as a virtualised ARIA tree: only the rows in the scrolled window (plus a few
// either side) are in the DOM, so 100k entries scroll as smoothly as 100. Written here rather than
// taken from a list library: fixed-height rows make it a few lines, and keeps the bundle small.
// Keyboard: Up/Down/Home/End/PageUp/PageDown move, Right expands (or enters), Left collapses (or
// goes to the parent), Enter opens a file or toggles a directory.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  formatSize,
  type FsNode,
  isDirNode,
  liveVersion,
  modeString,
  primaryVersion,
  type Row,
} from "./model.ts";

export const ROW_HEIGHT = 26;
const OVERSCAN = 8;

export function rowKey(r: Row): string {
  return `${r.node.path}\n${r.version ? r.version.layer : -1}`;
}

function hiddenNote(r: Row): string | null {
  const v = r.version;
  if (!v) return r.node.present ? null : `removed by L${r.node.removedBy + 1}`;
  if (v.hiddenBy < 0 || v.how === "updated") return null;
  return `${v.how} by L${v.hiddenBy + 1}`;
}

export interface TreeProps {
  rows: Row[];
  expanded: Set<FsNode>;
  /** open every directory regardless of `expanded` (a filter or focus is on) */
  allOpen: boolean;
  selected: string | null;
  opened: string | null;
  onSelect: (r: Row) => void;
  onOpen: (r: Row) => void;
  onToggle: (n: FsNode, open: boolean) => void;
  showChange: boolean;
}

export function Tree(p: TreeProps) {
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(480);
  const frame = useRef(0);

  useLayoutEffect(() => {
    const el = box.current!;
    setHeight(el.clientHeight || 480);
    const ro = new ResizeObserver(() => setHeight(el.clientHeight || 480));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  // key → line, made once per set of lines so a key press is not a scan of 100k lines
  const indexOf = useMemo(() => {
    const m = new Map<string, number>();
    p.rows.forEach((r, i) => m.set(rowKey(r), i));
    return m;
  }, [p.rows]);
  const index = p.selected === null ? -1 : indexOf.get(p.selected) ?? -1;

  // Keep the selected row in the window when it moves (keyboard, deep link).
  useEffect(() => {
    const el = box.current;
    if (!el || index < 0) return;
    const top = index * ROW_HEIGHT;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + ROW_HEIGHT > el.scrollTop + el.clientHeight) {
      el.scrollTop = top + ROW_HEIGHT - el.clientHeight;
    }
    setScrollTop(el.scrollTop);
  }, [index, p.selected]);

  const onScroll = () => {
    if (frame.current) return;
    frame.current = requestAnimationFrame(() => {
      frame.current = 0;
      if (box.current) setScrollTop(box.current.scrollTop);
    });
  };

  const isOpen = (n: FsNode) => p.allOpen || p.expanded.has(n);

  const onKey = (e: KeyboardEvent) => {
    const rows = p.rows;
    if (rows.length === 0) return;
    const cur = index < 0 ? 0 : index;
    const page = Math.max(1, Math.floor(height / ROW_HEIGHT) - 1);
    const go = (i: number) => p.onSelect(rows[Math.max(0, Math.min(rows.length - 1, i))]);
    const r = rows[cur];
    const dir = r.primary && isDirNode(r.node) && r.node.children !== null;
    switch (e.key) {
      case "ArrowDown":
        go(index < 0 ? 0 : cur + 1);
        break;
      case "ArrowUp":
        go(cur - 1);
        break;
      case "Home":
        go(0);
        break;
      case "End":
        go(rows.length - 1);
        break;
      case "PageDown":
        go(cur + page);
        break;
      case "PageUp":
        go(cur - page);
        break;
      case "ArrowRight":
        if (dir && !isOpen(r.node)) p.onToggle(r.node, true);
        else if (dir) go(cur + 1);
        break;
      case "ArrowLeft":
        if (dir && isOpen(r.node) && !p.allOpen) p.onToggle(r.node, false);
        else {
          const parent = r.node.parent;
          const at = parent && parent.parent
            ? indexOf.get(rowKey({ node: parent, version: primaryVersion(parent), primary: true }))
            : undefined;
          if (at !== undefined) go(at);
        }
        break;
      case "Enter":
      case " ":
        if (dir && !p.allOpen) p.onToggle(r.node, !isOpen(r.node));
        p.onOpen(r);
        break;
      default:
        return;
    }
    e.preventDefault();
  };

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(
    p.rows.length,
    Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN,
  );
  const items = [];
  for (let i = first; i < last; i++) {
    const r = p.rows[i];
    const key = rowKey(r);
    const n = r.node;
    const v = r.version;
    const dir = r.primary && isDirNode(n) && n.children !== null;
    const note = hiddenNote(r);
    const gone = note !== null;
    const live = v !== null && liveVersion(n) === v;
    items.push(
      <div
        key={key}
        id={`fs-row-${i}`}
        role="treeitem"
        aria-level={n.depth + 1}
        aria-expanded={dir ? isOpen(n) : undefined}
        aria-selected={key === p.selected}
        class={`fs-row${key === p.selected ? " selected" : ""}${key === p.opened ? " opened" : ""}${
          gone ? " gone" : ""
        }${r.primary ? "" : " version"}`}
        style={{ top: `${i * ROW_HEIGHT}px` }}
        data-path={n.path}
        data-layer={v ? v.layer + 1 : ""}
        data-live={live ? "true" : "false"}
        onClick={() => {
          p.onSelect(r);
          if (dir && !p.allOpen) p.onToggle(n, !isOpen(n));
          p.onOpen(r);
        }}
      >
        <span
          class="fs-name"
          style={{ paddingLeft: `${n.depth * 1.1 + 0.3}rem` }}
        >
          <span class="fs-twisty" aria-hidden="true">
            {dir ? (isOpen(n) ? "▾" : "▸") : ""}
          </span>
          {gone ? <s>{n.name}</s> : <span>{n.name}</span>}
          {v?.entry.link_target ? <span class="fs-link">→ {v.entry.link_target}</span> : null}
        </span>
        <span class="fs-layer">{v ? `L${v.layer + 1}` : ""}</span>
        <span class="fs-size">
          {v && v.entry.kind === "file" ? formatSize(v.entry.size) : ""}
        </span>
        <span class="fs-mode">{v ? modeString(v.entry) : ""}</span>
        <span class="fs-note">
          {p.showChange && r.change
            ? <span class={`fs-change ${r.change}`}>{r.change}</span>
            : null}
          {note ? <span class="fs-gone-note">{note}</span> : null}
        </span>
      </div>,
    );
  }
  return (
    <div class="fs-tree-wrap">
      <div class="fs-head" aria-hidden="true">
        <span class="fs-name">Name</span>
        <span class="fs-layer">Layer</span>
        <span class="fs-size">Size</span>
        <span class="fs-mode">Mode</span>
        <span class="fs-note">Status</span>
      </div>
      <div
        ref={box}
        class="fs-tree"
        // as tall as its lines up to the stylesheet's cap, so a small image leaves no blank box
        style={{ height: `min(70vh, 36rem, ${Math.max(p.rows.length, 4) * ROW_HEIGHT + 2}px)` }}
        role="tree"
        aria-label="Files of the image"
        tabIndex={0}
        aria-activedescendant={index >= 0 && index >= first && index < last
          ? `fs-row-${index}`
          : undefined}
        onKeyDown={onKey}
        onScroll={onScroll}
      >
        <div
          role="none"
          class="fs-spacer"
          style={{ height: `${p.rows.length * ROW_HEIGHT}px` }}
        >
          {items}
        </div>
      </div>
      {p.rows.length === 0 ? <p class="muted">No entries match.</p> : null}
    </div>
  );
}
