// `/{namespace}`: the manifests of a namespace. The listing is read whole, so the filter and the
// sort apply to every entry, not to a page; rows are rendered a window at a time. Sizes and a
// single image's platform come with the listing (the server reads them from the content).
import { useMemo, useState } from "preact/hooks";
import { getJson, nsPath, type Revision } from "./api.ts";
import { CopyButton } from "./buttons.tsx";
import { useLoad } from "./hooks.ts";
import {
  type FetchedManifest,
  fetchManifest,
  humanSize,
  platformBadge,
  shortDigest,
} from "./oci.ts";
import { COMPARE_PATH } from "./route.ts";
import { PageError } from "./not_found.tsx";
import { Loading } from "./states.tsx";
import { SignatureBadge } from "./signatures.tsx";

type SortKey = "pushed" | "pulled" | "tag" | "digest";
const WINDOW = 200;

interface Derived {
  /** platform badges: an index's children, or the platform its indexes give a child */
  platforms: Map<string, string[]>;
  /** a referrer's artifact type, from its subject's referrers entry */
  artifactTypes: Map<string, string>;
}

function derive(revs: Revision[]): Derived {
  const platforms = new Map<string, string[]>();
  const artifactTypes = new Map<string, string>();
  const add = (digest: string, badge: string) => {
    const list = platforms.get(digest) ?? [];
    if (!list.includes(badge)) list.push(badge);
    platforms.set(digest, list);
  };
  for (const r of revs) {
    if (r.platform) add(r.digest, platformBadge(r.platform));
    for (const p of r.parents ?? []) {
      const badge = platformBadge(p.platform);
      add(r.digest, badge);
      add(p.digest, badge);
    }
    for (const ref of r.referrers ?? []) {
      artifactTypes.set(ref.digest, ref.artifactType);
    }
  }
  return { platforms, artifactTypes };
}

/** Every blob the namespace's manifests name, counted once. */
async function namespaceTotal(
  namespace: string,
  revs: Revision[],
): Promise<number> {
  const blobs = new Map<string, number>();
  const one = async (digest: string) => {
    let f: FetchedManifest;
    try {
      f = await fetchManifest(namespace, digest);
    } catch {
      return;
    }
    blobs.set(f.digest, f.size);
    const m = f.manifest;
    if (m.config) blobs.set(m.config.digest, m.config.size);
    for (const l of m.layers ?? []) blobs.set(l.digest, l.size);
  };
  for (let i = 0; i < revs.length; i += 8) {
    await Promise.all(revs.slice(i, i + 8).map((r) => one(r.digest)));
  }
  return [...blobs.values()].reduce((s, n) => s + (n ?? 0), 0);
}

export function Manifests({ namespace }: { namespace: string }) {
  const { data, error, reload } = useLoad(
    () =>
      getJson<{ name: string; manifests: Revision[] }>(
        `/v2/${nsPath(namespace)}/_svc/revisions/list`,
      ).then((b) => b.manifests),
    [namespace],
  );
  const [filter, setFilter] = useState("");
  const [sort, setSort] = useState<SortKey>("pushed");
  const [limit, setLimit] = useState(WINDOW);
  const [total, setTotal] = useState<number | "busy" | null>(null);
  const derived = useMemo(() => derive(data ?? []), [data]);
  const shown = useMemo(() => {
    if (!data) return [];
    const f = filter.trim().toLowerCase();
    const hit = (r: Revision) =>
      !f || r.digest.includes(f) || r.tags.some((t) => t.toLowerCase().includes(f)) ||
      (derived.platforms.get(r.digest) ?? []).some((p) => p.includes(f)) ||
      (derived.artifactTypes.get(r.digest) ?? "").toLowerCase().includes(f);
    const key = (r: Revision) =>
      sort === "pushed"
        ? r.pushed_at ?? ""
        : sort === "pulled"
        ? r.last_pulled_at ?? ""
        : sort === "tag"
        ? (r.tags[0] ?? "\uffff")
        : r.digest;
    const newestFirst = sort === "pushed" || sort === "pulled";
    return data.filter(hit).sort((a, b) => {
      const x = key(a), y = key(b);
      return newestFirst ? (x < y ? 1 : x > y ? -1 : 0) : (x < y ? -1 : x > y ? 1 : 0);
    });
  }, [data, filter, sort, derived]);
  const visible = shown.slice(0, limit);
  if (error) return <PageError error={error} retry={reload} />;
  if (!data) return <Loading />;
  const repo = namespace.split("/")[0];
  const computeTotal = () => {
    setTotal("busy");
    namespaceTotal(namespace, data).then(setTotal).catch(() => setTotal(null));
  };
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
            placeholder="tag, digest, platform or type"
            onInput={(e) => {
              setFilter((e.target as HTMLInputElement).value);
              setLimit(WINDOW);
            }}
          />
        </label>
        <label>
          Sort{" "}
          <select
            value={sort}
            onChange={(e) => setSort((e.target as HTMLSelectElement).value as SortKey)}
          >
            <option value="pushed">newest push</option>
            <option value="pulled">newest pull</option>
            <option value="tag">tag</option>
            <option value="digest">digest</option>
          </select>
        </label>
        <span class="muted" data-count>{shown.length} of {data.length}</span>
        <a class="button" href={`${COMPARE_PATH}/${namespace}`}>
          Compare two images
        </a>
        {total === null
          ? <button type="button" onClick={computeTotal}>Total size</button>
          : (
            <span data-total>
              {total === "busy" ? "Adding up…" : `Total: ${humanSize(total)} in distinct blobs`}
            </span>
          )}
      </div>
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Tags</th>
            <th scope="col">Digest</th>
            <th scope="col">Platforms / type</th>
            <th scope="col">Size</th>
            <th scope="col">Pushed</th>
            <th scope="col">Last pulled</th>
            <th scope="col">
              <span class="sr-only">Pull line</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {visible.map((r) => {
            const line = `docker pull ${location.host}/${namespace}${
              r.tags[0] ? `:${r.tags[0]}` : `@${r.digest}`
            }`;
            const type = derived.artifactTypes.get(r.digest);
            return (
              <tr key={r.digest} data-digest={r.digest}>
                <td>
                  {r.tags.map((t) => <a key={t} class="tag" href={`/${namespace}:${t}`}>{t}</a>)}
                  {(r.held_tags ?? []).map((t) => (
                    <a
                      key={t}
                      class="tag held"
                      href={`/${namespace}:${t}`}
                      title="held"
                    >
                      {t}
                    </a>
                  ))}
                </td>
                <td>
                  <a class="digest" href={`/${namespace}@${r.digest}`}>
                    {shortDigest(r.digest)}
                  </a>
                </td>
                <td>
                  {(derived.platforms.get(r.digest) ?? []).map((p) => (
                    <span key={p} class="badge platform">{p}</span>
                  ))}
                  {type && <span class="badge">{type}</span>}
                  <SignatureBadge state={r.signature} />
                </td>
                <td class="num" data-size>{humanSize(r.size)}</td>
                <td>
                  {r.pushed_at ? new Date(r.pushed_at).toLocaleString() : ""}
                </td>
                <td>
                  {r.last_pulled_at ? new Date(r.last_pulled_at).toLocaleString() : ""}
                </td>
                <td>
                  <CopyButton text={line} label="Copy pull line" />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {shown.length > limit && (
        <button
          type="button"
          onClick={() => setLimit(limit + WINDOW)}
        >
          Show {Math.min(WINDOW, shown.length - limit)} more of {shown.length - limit}
        </button>
      )}
    </section>
  );
}
