// `/_compare/{namespace}?from=&to=[&from_platform=&to_platform=]`: two images of a namespace
// compared by their merged filesystems (the image diff endpoint): sizes, waste, and what was
// added, removed or changed. From and To offer the namespace's tags (and untagged images); an
// index asks for a platform, which the page resolves to that platform's image for the diff. Layers
// not fully indexed are named with their state, and the page then never says the two are the same.
import { useState } from "preact/hooks";
import { apiFetch, checked, getJson, nsPath, type Revision } from "./api.ts";
import { CopyButton } from "./buttons.tsx";
import { useInterval, useLoad } from "./hooks.ts";
import { humanSize, platformBadge, shortDigest } from "./oci.ts";
import { COMPARE_PATH, navigate } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

/** A layer of a side the diff could not (fully) compare, with its index state and reason. */
interface Unindexed {
  digest: string;
  state: string;
  error?: string;
}
interface Side {
  digest: string;
  layers: string[];
  unindexed?: Unindexed[];
  files: number;
  regular_files?: number;
  total_bytes: number;
  wasted_bytes: number;
  efficiency: number;
}
interface Entry {
  path: string;
  kind: string;
  size: number;
  mode: number;
  layer: string;
}
interface Diff {
  from: Side;
  to: Side;
  added: Entry[];
  removed: Entry[];
  modified: { path: string; changes: string[]; from: Entry; to: Entry }[];
  truncated?: boolean;
  /** every layer of both images was fully indexed (absent from older servers: read as true) */
  complete?: boolean;
}

/** States a layer stays in: anything else (indexing could not run) is retried by the server. */
const FINAL_STATES = new Set(["partial", "unsupported", "not-stored"]);

function stateText(state: string): string {
  switch (state) {
    case "partial":
      return "partial listing (only what could be read was compared)";
    case "unsupported":
      return "not listed";
    case "not-stored":
      return "its blob is not stored here";
    case "unavailable":
      return "indexing could not run on this machine; it is retried";
    default:
      return state;
  }
}

/** The layers of either image that were not (fully) compared, each with its state. */
function NotIndexed({ labels, diff }: { labels: [string, string]; diff: Diff }) {
  const rows = ([[labels[0], diff.from], [labels[1], diff.to]] as [string, Side][])
    .flatMap(([label, side]) => (side.unindexed ?? []).map((l) => ({ label, side, l })));
  if (rows.length === 0) return null;
  return (
    <div class="not-indexed" role="note" data-section="not-indexed">
      <p>
        <strong>Not fully compared:</strong>{" "}
        {rows.length === 1 ? "this layer is" : "these layers are"}{" "}
        not fully indexed, so the files in {rows.length === 1 ? "it" : "them"}{" "}
        were not (all) compared.
      </p>
      <ul>
        {rows.map(({ label, side, l }) => (
          <li key={`${label}/${l.digest}`} data-layer={l.digest} data-state={l.state}>
            {label} <LayerRef side={side} digest={l.digest} />: {stateText(l.state)}
            {l.error ? `: ${l.error}` : ""}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** What the namespace offers for From and To: tags, and which digests are indexes of what. */
interface Choices {
  tags: { tag: string; digest: string }[];
  untagged: string[];
  /** index digest → its platform images */
  platforms: Map<string, { badge: string; digest: string }[]>;
  digestOf: (ref: string) => string | undefined;
}

function choicesOf(revs: Revision[]): Choices {
  const platforms = new Map<string, { badge: string; digest: string }[]>();
  for (const r of revs) {
    for (const p of r.parents ?? []) {
      const badge = platformBadge(p.platform);
      if (badge === "unknown") continue; // attestations
      const list = platforms.get(p.digest) ?? [];
      list.push({ badge, digest: r.digest });
      platforms.set(p.digest, list);
    }
  }
  const tags = revs.flatMap((r) => r.tags.map((tag) => ({ tag, digest: r.digest })))
    .sort((a, b) => (a.tag < b.tag ? -1 : 1));
  // untagged images that are not an index's child nor a referrer: pushed by digest
  const children = new Set(revs.filter((r) => r.parents?.length).map((r) => r.digest));
  const referrers = new Set(revs.flatMap((r) => (r.referrers ?? []).map((x) => x.digest)));
  const untagged = revs.filter((r) =>
    r.tags.length === 0 && !children.has(r.digest) && !referrers.has(r.digest)
  ).map((r) => r.digest);
  const byTag = new Map(tags.map((t) => [t.tag, t.digest]));
  return {
    tags,
    untagged,
    platforms,
    digestOf: (ref) => (ref.includes(":") ? ref : byTag.get(ref)),
  };
}

/** The image a side names: the ref itself, or the chosen platform's image of an index. */
function imageRef(c: Choices | null, ref: string, platform: string): string {
  const digest = c?.digestOf(ref);
  const kids = digest ? c?.platforms.get(digest) : undefined;
  if (!kids?.length) return ref;
  return (kids.find((k) => k.badge === platform) ?? kids[0]).digest;
}

async function loadDiff(
  ns: string,
  from: string,
  to: string,
): Promise<Diff | "indexing"> {
  const r = await checked(
    await apiFetch(
      `/v2/${nsPath(ns)}/_svc/diff?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
      { headers: { accept: "application/json" } },
    ),
  );
  if (r.status === 202) {
    await r.body?.cancel();
    return "indexing";
  }
  return await r.json() as Diff;
}

function Digest({ digest }: { digest: string }) {
  return (
    <span class="digest-cell">
      <code title={digest}>{shortDigest(digest)}</code> <CopyButton text={digest} label="Copy" />
    </span>
  );
}

/** `L2` for a layer of the side's image (its position), the digest on hover and in a copy. */
function LayerRef({ side, digest }: { side: Side; digest: string }) {
  const i = side.layers.indexOf(digest);
  return (
    <span class="layer-ref" title={digest} data-layer={digest}>
      {i >= 0 ? `L${i + 1}` : shortDigest(digest)}
    </span>
  );
}

function EntryTable(
  { title, rows, side }: { title: string; rows: Entry[]; side: Side },
) {
  if (rows.length === 0) return null;
  return (
    <>
      <h2>{title} ({rows.length})</h2>
      <table class="list compare-entries" data-section={title.toLowerCase()}>
        <thead>
          <tr>
            <th scope="col">Path</th>
            <th scope="col">Kind</th>
            <th scope="col">Size</th>
            <th scope="col">Layer</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.path}>
              <td>
                <code>{e.path}</code>
              </td>
              <td>{e.kind}</td>
              <td class="num">{humanSize(e.size)}</td>
              <td>
                <LayerRef side={side} digest={e.layer} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function DiffView(
  { namespace, from, to, labels }: {
    namespace: string;
    from: string;
    to: string;
    labels: [string, string];
  },
) {
  const { data, error, reload } = useLoad(() => loadDiff(namespace, from, to), [
    namespace,
    from,
    to,
  ]);
  useInterval(reload, 2000, data === "indexing");
  // A layer whose indexing could not run is retried by the server: the diff is asked again.
  const retried = !!data && data !== "indexing" &&
    [data.from, data.to].some((s) => (s.unindexed ?? []).some((l) => !FINAL_STATES.has(l.state)));
  useInterval(reload, 10_000, retried);
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  if (data === "indexing") {
    return <Loading text="Indexing the layers of both images…" />;
  }
  const side = (label: string, s: Side) => (
    <tr data-side={label}>
      <th scope="row">{label}</th>
      <td>
        <Digest digest={s.digest} />
      </td>
      <td class="num">{s.layers.length}</td>
      <td class="num" data-files>{s.regular_files ?? s.files}</td>
      <td class="num" data-paths>{s.files}</td>
      <td class="num">{humanSize(s.total_bytes)}</td>
      <td class="num">{humanSize(s.wasted_bytes)}</td>
      <td class="num">{(s.efficiency * 100).toFixed(2)} %</td>
    </tr>
  );
  return (
    <div data-section="diff">
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Image</th>
            <th scope="col">Digest</th>
            <th scope="col">Layers</th>
            <th scope="col">Files</th>
            <th scope="col">Paths</th>
            <th scope="col">Total</th>
            <th scope="col">Wasted</th>
            <th scope="col">Efficiency</th>
          </tr>
        </thead>
        <tbody>
          {side(labels[0], data.from)}
          {side(labels[1], data.to)}
        </tbody>
      </table>
      <p class="muted">
        Files: the regular files the merged filesystem shows (as the Filesystem tab counts them).
        Paths: every entry it shows, directories and links included. Layers are numbered from the
        base (L1) of each image.
      </p>
      <NotIndexed labels={labels} diff={data} />
      {data.truncated && (
        <p class="muted">
          Each list is cut at 1,000 entries.
        </p>
      )}
      <EntryTable title="Added" rows={data.added} side={data.to} />
      <EntryTable title="Removed" rows={data.removed} side={data.from} />
      {data.modified.length > 0 && (
        <>
          <h2>Modified ({data.modified.length})</h2>
          <table class="list compare-entries" data-section="modified">
            <thead>
              <tr>
                <th scope="col">Path</th>
                <th scope="col">Changed</th>
                <th scope="col">Size</th>
                <th scope="col">Layers</th>
              </tr>
            </thead>
            <tbody>
              {data.modified.map((m) => (
                <tr key={m.path}>
                  <td>
                    <code>{m.path}</code>
                  </td>
                  <td>{m.changes.join(", ")}</td>
                  <td class="num">
                    {humanSize(m.from.size)} → {humanSize(m.to.size)}
                  </td>
                  <td>
                    <LayerRef side={data.from} digest={m.from.layer} /> →{" "}
                    <LayerRef side={data.to} digest={m.to.layer} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {data.added.length + data.removed.length + data.modified.length === 0 && (
        data.complete === false
          ? (
            <p class="empty" data-incomplete>
              No differences in what was compared; the layers named above were not (all) compared.
            </p>
          )
          : <p class="empty">The two filesystems are the same.</p>
      )}
    </div>
  );
}

function SidePicker(
  { label, value, platform, choices, onChange }: {
    label: string;
    value: string;
    platform: string;
    choices: Choices | null;
    onChange: (value: string, platform: string) => void;
  },
) {
  const digest = choices?.digestOf(value);
  const kids = digest ? choices?.platforms.get(digest) ?? [] : [];
  const listId = `c-refs-${label.toLowerCase()}`;
  return (
    <span class="side-picker">
      <label>
        {label}{" "}
        <input
          list={listId}
          value={value}
          name={label.toLowerCase()}
          placeholder="tag or digest"
          onInput={(e) => onChange((e.target as HTMLInputElement).value, "")}
        />
      </label>
      <datalist id={listId}>
        {(choices?.tags ?? []).map((t) => (
          <option key={t.tag} value={t.tag}>
            {choices!.platforms.has(t.digest) ? "index" : shortDigest(t.digest)}
          </option>
        ))}
        {(choices?.untagged ?? []).map((d) => <option key={d} value={d} />)}
      </datalist>
      {kids.length > 0 && (
        <label>
          {label} platform{" "}
          <select
            name={`${label.toLowerCase()}_platform`}
            value={kids.some((k) => k.badge === platform) ? platform : kids[0].badge}
            onChange={(e) => onChange(value, (e.target as HTMLSelectElement).value)}
          >
            {kids.map((k) => <option key={k.digest} value={k.badge}>{k.badge}</option>)}
          </select>
        </label>
      )}
    </span>
  );
}

export function Compare({ namespace }: { namespace: string }) {
  const params = new URLSearchParams(location.search);
  const from = params.get("from") ?? "";
  const to = params.get("to") ?? "";
  const fromPlatform = params.get("from_platform") ?? "";
  const toPlatform = params.get("to_platform") ?? "";
  const [a, setA] = useState({ ref: from, platform: fromPlatform });
  const [b, setB] = useState({ ref: to, platform: toPlatform });
  const revs = useLoad(
    () =>
      getJson<{ manifests: Revision[] }>(
        `/v2/${nsPath(namespace)}/_svc/revisions/list`,
      ).then((r) => choicesOf(r.manifests)),
    [namespace],
  );
  const choices = revs.data ?? null;
  const platformOf = (side: { ref: string; platform: string }) => {
    const d = choices?.digestOf(side.ref);
    const kids = d ? choices?.platforms.get(d) : undefined;
    if (!kids?.length) return "";
    return kids.some((k) => k.badge === side.platform) ? side.platform : kids[0].badge;
  };
  const go = (e: Event) => {
    e.preventDefault();
    const q = new URLSearchParams({ from: a.ref.trim(), to: b.ref.trim() });
    const pa = platformOf(a), pb = platformOf(b);
    if (pa) q.set("from_platform", pa);
    if (pb) q.set("to_platform", pb);
    navigate(`${COMPARE_PATH}/${namespace}?${q}`);
  };
  // The diff waits for the listing only when a side may be an index (its platform is needed).
  const ready = from && to && (choices || revs.error);
  const label = (ref: string, p: string) => (p ? `${ref} (${p})` : ref);
  // As the manifest pages name it: the namespace's first segment.
  const repo = namespace.split("/")[0];
  return (
    <section aria-labelledby="c-title">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <a href={`/${repo}`}>{repo}</a> /{" "}
        <a href={`/${namespace}`}>{namespace}</a> / <span>Compare</span>
      </nav>
      <h1 id="c-title">Compare images of {namespace}</h1>
      <form class="tools" onSubmit={go}>
        <SidePicker
          label="From"
          value={a.ref}
          platform={a.platform}
          choices={choices}
          onChange={(ref, platform) => setA({ ref, platform })}
        />
        <SidePicker
          label="To"
          value={b.ref}
          platform={b.platform}
          choices={choices}
          onChange={(ref, platform) => setB({ ref, platform })}
        />
        <button type="submit" disabled={!a.ref.trim() || !b.ref.trim()}>Compare</button>
      </form>
      {ready && (
        <DiffView
          namespace={namespace}
          from={imageRef(choices, from, fromPlatform)}
          to={imageRef(choices, to, toPlatform)}
          labels={[
            label(from, platformOf({ ref: from, platform: fromPlatform })),
            label(to, platformOf({ ref: to, platform: toPlatform })),
          ]}
        />
      )}
    </section>
  );
}
