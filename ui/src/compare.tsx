// `/_compare/{namespace}?from=&to=`: two images of a namespace compared by their merged
// filesystems (the image diff endpoint): sizes, waste, and what was added, removed or changed.
import { useState } from "preact/hooks";
import { apiFetch, checked, getJson, nsPath, type Revision } from "./api.ts";
import { useInterval, useLoad } from "./hooks.ts";
import { humanSize } from "./oci.ts";
import { COMPARE_PATH, navigate } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

interface Side {
  digest: string;
  layers: number;
  files: number;
  total_bytes: number;
  wasted_bytes: number;
  efficiency: number;
}
interface Entry {
  path: string;
  kind: string;
  size: number;
  mode: number;
}
interface Diff {
  from: Side;
  to: Side;
  added: Entry[];
  removed: Entry[];
  modified: { path: string; changes: string[]; from: Entry; to: Entry }[];
  truncated?: boolean;
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

function EntryTable({ title, rows }: { title: string; rows: Entry[] }) {
  if (rows.length === 0) return null;
  return (
    <>
      <h2>{title} ({rows.length})</h2>
      <table class="list" data-section={title.toLowerCase()}>
        <tbody>
          {rows.map((e) => (
            <tr key={e.path}>
              <td>
                <code>{e.path}</code>
              </td>
              <td>{e.kind}</td>
              <td class="num">{humanSize(e.size)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function DiffView(
  { namespace, from, to }: { namespace: string; from: string; to: string },
) {
  const { data, error, reload } = useLoad(() => loadDiff(namespace, from, to), [
    namespace,
    from,
    to,
  ]);
  useInterval(reload, 2000, data === "indexing");
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  if (data === "indexing") {
    return <Loading text="Indexing the layers of both images…" />;
  }
  const side = (label: string, s: Side) => (
    <tr>
      <th scope="row">{label}</th>
      <td class="num">{s.layers}</td>
      <td class="num">{s.files}</td>
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
            <th scope="col">Layers</th>
            <th scope="col">Files</th>
            <th scope="col">Total</th>
            <th scope="col">Wasted</th>
            <th scope="col">Efficiency</th>
          </tr>
        </thead>
        <tbody>
          {side(from, data.from)}
          {side(to, data.to)}
        </tbody>
      </table>
      {data.truncated && (
        <p class="muted">
          Each list is cut at 1,000 entries.
        </p>
      )}
      <EntryTable title="Added" rows={data.added} />
      <EntryTable title="Removed" rows={data.removed} />
      {data.modified.length > 0 && (
        <>
          <h2>Modified ({data.modified.length})</h2>
          <table class="list" data-section="modified">
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
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {data.added.length + data.removed.length + data.modified.length === 0 && (
        <p class="empty">The two filesystems are the same.</p>
      )}
    </div>
  );
}

export function Compare({ namespace }: { namespace: string }) {
  const params = new URLSearchParams(location.search);
  const from = params.get("from") ?? "";
  const to = params.get("to") ?? "";
  const [a, setA] = useState(from);
  const [b, setB] = useState(to);
  const revs = useLoad(
    () =>
      getJson<{ manifests: Revision[] }>(
        `/v2/${nsPath(namespace)}/_svc/revisions/list`,
      ),
    [namespace],
  );
  const tags = (revs.data?.manifests ?? []).flatMap((r) => r.tags).sort();
  const go = (e: Event) => {
    e.preventDefault();
    navigate(
      `${COMPARE_PATH}/${namespace}?from=${encodeURIComponent(a)}&to=${encodeURIComponent(b)}`,
    );
  };
  return (
    <section aria-labelledby="c-title">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <a href={`/${namespace}`}>{namespace}</a>
      </nav>
      <h1 id="c-title">Compare images of {namespace}</h1>
      <form class="tools" onSubmit={go}>
        <label>
          From{" "}
          <input
            list="c-tags"
            value={a}
            onInput={(e) => setA((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          To{" "}
          <input
            list="c-tags"
            value={b}
            onInput={(e) => setB((e.target as HTMLInputElement).value)}
          />
        </label>
        <datalist id="c-tags">
          {tags.map((t) => <option key={t} value={t} />)}
        </datalist>
        <button type="submit" disabled={!a || !b}>Compare</button>
      </form>
      {from && to && <DiffView namespace={namespace} from={from} to={to} />}
    </section>
  );
}
