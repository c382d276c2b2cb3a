// Finding an image by name across the registry: the top bar's box (suggestions as you type, Enter
// opens the only match or the results) and `/_images?q=` (every namespace whose name holds the
// words). Names come from `GET /v2/_catalog`, which lists only what the caller may see, read
// once per page load in pages of 10,000.
import { useState } from "preact/hooks";
import { apiFetch, checked } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { IMAGES_PATH, navigate } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

const PAGE = 10_000;
/** A registry larger than this is searched over its first names only (said on the page). */
const MAX_NAMES = 200_000;
const SUGGESTIONS = 12;

let catalog: Promise<{ names: string[]; cut: boolean }> | null = null;

/** Every namespace the caller may see, read once (a failed read is tried again next time). */
export function loadCatalog(): Promise<{ names: string[]; cut: boolean }> {
  catalog ??= (async () => {
    const names: string[] = [];
    let url: string | null = `/v2/_catalog?n=${PAGE}`;
    while (url && names.length < MAX_NAMES) {
      const r = await checked(await apiFetch(url, { headers: { accept: "application/json" } }));
      names.push(...((await r.json()).repositories ?? []) as string[]);
      const link = r.headers.get("link");
      url = link ? /<([^>]+)>/.exec(link)?.[1] ?? null : null;
    }
    return { names, cut: url !== null };
  })().catch((e) => {
    catalog = null;
    throw e;
  });
  return catalog;
}

/** Names holding every word of the query (any case), those starting with it first. */
export function matchNames(names: string[], query: string): string[] {
  const q = query.trim().toLowerCase();
  const words = q.split(/\s+/).filter(Boolean);
  if (words.length === 0) return [];
  const hits = names.filter((n) => words.every((w) => n.includes(w)));
  const starts = (n: string) => n.startsWith(q) || n.includes("/" + q);
  return hits.sort((a, b) => Number(starts(b)) - Number(starts(a)) || (a < b ? -1 : 1));
}

export function TopImageSearch() {
  const [q, setQ] = useState("");
  const [names, setNames] = useState<string[] | null>(null);
  const load = () => {
    if (!names) loadCatalog().then((c) => setNames(c.names)).catch(() => {});
  };
  const hits = names ? matchNames(names, q).slice(0, SUGGESTIONS) : [];
  const submit = async (e: Event) => {
    e.preventDefault();
    const v = q.trim();
    if (!v) return;
    let all: string[] = [];
    try {
      all = matchNames((await loadCatalog()).names, v);
    } catch {
      // the results page reports the error
    }
    setQ("");
    navigate(
      all.length === 1 || all.includes(v)
        ? `/${all.includes(v) ? v : all[0]}`
        : `${IMAGES_PATH}?q=${encodeURIComponent(v)}`,
    );
  };
  return (
    <form class="image-search" role="search" aria-label="Images" onSubmit={submit}>
      <label>
        <span class="sr-only">Find an image by name</span>
        <input
          type="search"
          name="image"
          list="image-names"
          placeholder="Find image…"
          autocomplete="off"
          value={q}
          onFocus={load}
          onInput={(e) => {
            load();
            setQ((e.target as HTMLInputElement).value);
          }}
        />
      </label>
      <datalist id="image-names">
        {hits.map((n) => <option key={n} value={n} />)}
      </datalist>
    </form>
  );
}

export function ImageResults() {
  const q = new URLSearchParams(location.search).get("q") ?? "";
  const { data, error, reload } = useLoad(() => loadCatalog(), []);
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  const hits = matchNames(data.names, q);
  return (
    <section aria-labelledby="img-title">
      <h1 id="img-title">Images matching “{q}”</h1>
      {data.cut && (
        <p class="muted">
          Only the first {MAX_NAMES.toLocaleString()} names of the registry were searched.
        </p>
      )}
      {hits.length === 0
        ? <p class="empty">No image you may see has such a name.</p>
        : (
          <ul class="image-hits" data-section="image-results">
            {hits.slice(0, 500).map((n) => (
              <li key={n} data-image={n}>
                <a href={`/${n}`}>{n}</a>
              </li>
            ))}
          </ul>
        )}
      {hits.length > 500 && <p class="muted">{hits.length - 500} more: narrow the words.</p>}
    </section>
  );
}
