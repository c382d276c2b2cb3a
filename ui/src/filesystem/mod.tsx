// The manifest details view's `#filesystem` tab (issue 12, point 3): the image's merged tree with
// a layer column, hidden versions struck through with the layer that hid them, a per-layer focus,
// a path filter, the Secrets, Permissions and Waste lists, and the open file's pane. The details
// view mounts <FilesystemTab> with the manifest's layers and the route parsed from the anchor
// (`#filesystem/<path>@L<n>`), and sets the anchor back when `navigate` is called.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ErrorState, Loading } from "../states.tsx";
import type { FsRoute } from "./anchor.ts";
import { apiFetch } from "../api.ts";
import { layerUrl, loadTree } from "./load.ts";
import {
  flatten,
  formatSize,
  type FsNode,
  type MergedTree,
  primaryVersion,
  type Row,
  type Version,
} from "./model.ts";
import { rowKey, Tree } from "./tree.tsx";
import { FilePane } from "./file_pane.tsx";
import { PermissionsView, SecretsView, WasteView } from "./views.tsx";
import "./filesystem.css";

export { fsAnchor, type FsRoute, parseFsAnchor } from "./anchor.ts";

export interface FsLayer {
  digest: string;
  size: number;
  mediaType: string;
}

export interface FilesystemTabProps {
  namespace: string;
  layers: FsLayer[];
  route: FsRoute;
  navigate: (route: FsRoute) => void;
}

type View = "tree" | "secrets" | "permissions" | "waste";
const VIEWS: [View, string][] = [
  ["tree", "Tree"],
  ["secrets", "Secrets"],
  ["permissions", "Permissions"],
  ["waste", "Waste"],
];

/** The node and version a route names: layer n's own version, else what layer n saw. */
export function resolveRoute(
  tree: MergedTree,
  route: FsRoute,
): { node: FsNode; version: Version | null } | null {
  if (!route.path) return null;
  const node = tree.byPath.get(
    route.path.replace(/^\/+/, "").replace(/\/+$/, ""),
  );
  if (!node) return null;
  if (route.layer === null) return { node, version: primaryVersion(node) };
  const li = route.layer - 1;
  let version: Version | null = null;
  for (const v of node.versions) if (v.layer <= li) version = v;
  return { node, version: version ?? primaryVersion(node) };
}

const keyOf = (node: FsNode, v: Version | null) => `${node.path}\n${v ? v.layer : -1}`;

export function FilesystemTab(props: FilesystemTabProps) {
  const { namespace, layers, route, navigate } = props;
  const digests = layers.map((l) => l.digest);
  const [tree, setTree] = useState<MergedTree | null>(null);
  const [indexing, setIndexing] = useState<number[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [attempt, setAttempt] = useState(0);
  const [view, setView] = useState<View>("tree");
  const [focus, setFocus] = useState<number | null>(null);
  const [filter, setFilter] = useState("");
  const expanded = useRef(new Set<FsNode>());
  const [tick, setTick] = useState(0);
  const [selected, setSelected] = useState<string | null>(null);

  useEffect(() => {
    const ac = new AbortController();
    setTree(null);
    setError(null);
    loadTree(namespace, digests, ac.signal, setIndexing).then(
      (t) => {
        // The 100k-entry test reads how long the merge took and when the listings were in.
        performance.mark("wharf-fs-listed");
        performance.measure("wharf-fs-build", {
          start: performance.now() - t.mergeMs,
          duration: t.mergeMs,
        });
        if (!ac.signal.aborted) {
          expanded.current = new Set();
          setTree(t);
        }
      },
      (e) => !ac.signal.aborted && setError(e),
    );
    return () => ac.abort();
  }, [namespace, digests.join(","), attempt]);

  // The 100k-entry test reads when the tree was first on screen.
  useEffect(() => {
    if (tree) performance.mark("wharf-fs-shown");
  }, [tree]);

  // A layer whose indexing could not run is retried by the server: it is asked again (HEAD, no
  // listing sent) when the server said to, and the tree reloads once it answers otherwise.
  useEffect(() => {
    const retried = tree?.unlisted.filter((u) => u.kind === "unavailable") ?? [];
    if (retried.length === 0) return;
    const secs = Math.min(60, Math.max(2, Math.min(...retried.map((u) => u.retryAfter ?? 5))));
    let live = true;
    const timer = setInterval(async () => {
      for (const u of retried) {
        const url = layerUrl(namespace, digests[u.layer], "entries");
        const r = await apiFetch(url, { method: "HEAD" }).catch(() => null);
        if (live && r && r.status !== 503) {
          setAttempt((a) => a + 1);
          return;
        }
      }
    }, secs * 1000);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [tree]);

  const target = tree ? resolveRoute(tree, route) : null;
  const openedKey = target ? keyOf(target.node, target.version) : null;

  const section = useRef<HTMLElement>(null);
  const revealing = useRef(false);
  // A deep link opens its file: its ancestors expand, a filter or layer focus that would hide
  // its line is cleared, its line is selected and the tree takes the keyboard focus.
  useEffect(() => {
    if (!target || !tree) return;
    for (let n = target.node.parent; n && n.parent; n = n.parent) {
      expanded.current.add(n);
    }
    const f = filter.trim().toLowerCase();
    if (
      (f || focus !== null) &&
      !flatten(tree, { expanded: expanded.current, focus, filter: f }).some((r) =>
        rowKey(r) === openedKey
      )
    ) {
      setFilter("");
      setFocus(null);
    }
    setSelected(openedKey);
    revealing.current = true;
    setTick((t) => t + 1);
  }, [tree, openedKey]);
  useEffect(() => {
    if (!revealing.current || !openedKey) return;
    if (!rows.some((r) => rowKey(r) === openedKey)) return;
    revealing.current = false;
    section.current?.querySelector<HTMLElement>(".fs-tree")?.focus();
  });

  const f = filter.trim().toLowerCase();
  const rows = useMemo(
    () => (tree ? flatten(tree, { expanded: expanded.current, focus, filter: f }) : []),
    // `expanded` is mutated in place; the tick re-renders and this recomputes with it
    [tree, focus, f, tick],
  );

  if (error) {
    return (
      <section data-tab="filesystem" aria-label="Filesystem">
        <ErrorState error={error} retry={() => setAttempt((a) => a + 1)} />
      </section>
    );
  }
  if (!tree) {
    return (
      <section data-tab="filesystem" aria-label="Filesystem" aria-busy="true">
        {indexing.length
          ? (
            <p class="fs-indexing" role="status" aria-live="polite">
              Indexing layer{indexing.length > 1 ? "s" : ""}{" "}
              {indexing.map((i) => `L${i + 1}`).join(", ")} of{" "}
              {layers.length}… the listing opens when the index is ready.
            </p>
          )
          : <Loading />}
      </section>
    );
  }

  const open = (r: FsRoute) => {
    setView("tree");
    navigate(r);
  };
  const openRow = (r: Row) =>
    open({ path: r.node.path, layer: r.version ? r.version.layer + 1 : null });
  const toggle = (n: FsNode, on: boolean) => {
    if (on) expanded.current.add(n);
    else expanded.current.delete(n);
    setTick((t) => t + 1);
  };
  const { wasteBytes: waste, visibleFiles } = tree;

  return (
    <section data-tab="filesystem" aria-label="Filesystem" class="fs" ref={section}>
      <p class="fs-summary" data-entries={tree.entryCount}>
        {tree.entryCount} entries in {tree.layerCount} layer{tree.layerCount === 1 ? "" : "s"},{" "}
        {visibleFiles} files in the image, {formatSize(waste)} wasted
      </p>
      {[...tree.unlisted].sort((a, b) => a.layer - b.layer).map((p) => (
        <p
          class="fs-warning"
          role="note"
          key={`u${p.layer}`}
          data-unlisted={p.layer + 1}
          data-kind={p.kind}
        >
          L{p.layer + 1}: {p.kind === "unavailable"
            ? `Indexing could not run: ${p.error}; it will be retried`
            : `Not listed: ${p.error}`}; the tree shows the other layers.
        </p>
      ))}
      {tree.partial.map((p) => (
        <p class="fs-warning" role="note" key={p.layer}>
          L{p.layer + 1}'s listing is partial: {p.error}
        </p>
      ))}
      <div class="fs-toolbar">
        <div role="group" aria-label="Filesystem views" class="fs-views">
          {VIEWS.map(([v, label]) => (
            <button
              type="button"
              key={v}
              data-view={v}
              aria-pressed={view === v}
              onClick={() => setView(v)}
            >
              {label}
            </button>
          ))}
        </div>
        {view === "tree"
          ? (
            <>
              <label>
                Layer{" "}
                <select
                  class="fs-focus"
                  value={focus === null ? "" : String(focus)}
                  onChange={(e) => {
                    const v = (e.target as HTMLSelectElement).value;
                    setFocus(v === "" ? null : Number(v));
                  }}
                >
                  <option value="">All layers (merged)</option>
                  {layers.map((l, i) => (
                    <option value={String(i)} key={i}>
                      L{i + 1} only: {l.digest.slice(7, 19)} ({formatSize(l.size)})
                    </option>
                  ))}
                </select>
              </label>
              <label>
                Filter paths{" "}
                <input
                  type="search"
                  class="fs-filter"
                  value={filter}
                  placeholder="e.g. etc/ssl"
                  onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
                />
              </label>
              <span class="muted" aria-live="polite">{rows.length} lines</span>
            </>
          )
          : null}
      </div>
      {view === "tree"
        ? (
          <div class="fs-main">
            <Tree
              rows={rows}
              expanded={expanded.current}
              allOpen={focus !== null || f !== ""}
              selected={selected}
              opened={openedKey}
              onSelect={(r) => setSelected(rowKey(r))}
              onOpen={openRow}
              onToggle={toggle}
              showChange={focus !== null}
            />
            {target
              ? (
                <FilePane
                  key={openedKey}
                  namespace={namespace}
                  digests={digests}
                  node={target.node}
                  version={target.version}
                />
              )
              : (
                <div class="fs-pane muted">
                  {route.path ? `${route.path} is not in this image.` : "Select a file to see it."}
                </div>
              )}
          </div>
        )
        : view === "secrets"
        ? <SecretsView tree={tree} open={open} />
        : view === "permissions"
        ? <PermissionsView tree={tree} open={open} />
        : <WasteView tree={tree} open={open} />}
    </section>
  );
}
