// `/{namespace}`: the manifests of a namespace. The listing is read whole, so the filter and the
// sort apply to every entry, not to a page.
import { useEffect, useMemo, useState } from "preact/hooks";
import { getJson, nsPath, type Revision } from "./api.ts";
import { ErrorState, Loading } from "./states.tsx";

type SortKey = "pushed" | "tag" | "digest";

function platforms(r: Revision): string {
  return (r.parents ?? []).map((p) => `${p.platform.os}/${p.platform.architecture}`).join(", ");
}

export function Manifests({ namespace }: { namespace: string }) {
  const [revs, setRevs] = useState<Revision[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [filter, setFilter] = useState("");
  const [sort, setSort] = useState<SortKey>("pushed");
  const load = () => {
    setError(null);
    getJson<{ name: string; manifests: Revision[] }>(`/v2/${nsPath(namespace)}/_svc/revisions/list`)
      .then((b) => setRevs(b.manifests)).catch(setError);
  };
  useEffect(load, [namespace]);
  const shown = useMemo(() => {
    if (!revs) return [];
    const f = filter.trim().toLowerCase();
    const hit = (r: Revision) =>
      !f || r.digest.includes(f) || r.tags.some((t) => t.toLowerCase().includes(f));
    const key = (r: Revision) =>
      sort === "pushed" ? r.pushed_at ?? "" : sort === "tag" ? (r.tags[0] ?? "\uffff") : r.digest;
    return revs.filter(hit).sort((a, b) => {
      const x = key(a), y = key(b);
      // newest pushes first; names and digests in ascending order
      return sort === "pushed" ? (x < y ? 1 : x > y ? -1 : 0) : (x < y ? -1 : x > y ? 1 : 0);
    });
  }, [revs, filter, sort]);
  if (error) return <ErrorState error={error} retry={load} />;
  if (!revs) return <Loading />;
  const repo = namespace.split("/")[0];
  return (
    <section aria-labelledby="m-title">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <a href={`/${repo}`}>{repo}</a> / <span>{namespace}</span>
      </nav>
      <h1 id="m-title">{namespace}</h1>
      <div class="tools">
        <label>
          Filter{" "}
          <input
            type="search"
            value={filter}
            placeholder="tag or digest"
            onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          Sort{" "}
          <select
            value={sort}
            onChange={(e) => setSort((e.target as HTMLSelectElement).value as SortKey)}
          >
            <option value="pushed">newest push</option>
            <option value="tag">tag</option>
            <option value="digest">digest</option>
          </select>
        </label>
        <span class="muted">{shown.length} of {revs.length}</span>
      </div>
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Tags</th>
            <th scope="col">Digest</th>
            <th scope="col">Platforms</th>
            <th scope="col">Pushed</th>
            <th scope="col">Last pulled</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <tr key={r.digest} data-digest={r.digest}>
              <td>
                {r.tags.map((t) => <a key={t} class="tag" href={`/${namespace}:${t}`}>{t}</a>)}
              </td>
              <td>
                <a class="digest" href={`/${namespace}@${r.digest}`}>{r.digest.slice(0, 19)}</a>
              </td>
              <td>{platforms(r)}</td>
              <td>{r.pushed_at ? new Date(r.pushed_at).toLocaleString() : ""}</td>
              <td>{r.last_pulled_at ? new Date(r.last_pulled_at).toLocaleString() : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
