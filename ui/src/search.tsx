// `/_search`: which images anywhere in the registry hold a file, by path, base name or sha256
// (the file search endpoint), with the query in the address so a search can be linked. A base
// name without `*` or `?` is searched as a prefix (`hello` finds `hello.sh`); `*.sh` as typed.
import { useState } from "preact/hooks";
import { getJson } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { humanSize, shortDigest } from "./oci.ts";
import { navigate, SEARCH_PATH } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

interface Result {
  namespace: string;
  manifest: string;
  tags: string[];
  layer: string;
  path: string;
  size: number;
}

type Mode = "name" | "path" | "sha256";
const MODES: Mode[] = ["name", "path", "sha256"];

/** What the endpoint is asked: a plain base name becomes the pattern `name*`. */
function asked(mode: Mode, value: string): string {
  return mode === "name" && !/[*?]/.test(value) ? `${value}*` : value;
}

function Results({ mode, value: typed }: { mode: Mode; value: string }) {
  const value = asked(mode, typed);
  const [pages, setPages] = useState<Result[][]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [moreError, setMoreError] = useState<unknown>(null);
  const first = useLoad(async () => {
    const b = await getJson<{ results: Result[]; next?: string }>(
      `/v2/_svc/files/search?${mode}=${encodeURIComponent(value)}`,
    );
    setPages([]);
    setNext(b.next ?? null);
    return b.results;
  }, [mode, value]);
  if (first.error) {
    return <ErrorState error={first.error} retry={first.reload} />;
  }
  if (!first.data) return <Loading />;
  const rows = [first.data, ...pages].flat();
  const more = async () => {
    try {
      const b = await getJson<{ results: Result[]; next?: string }>(
        `/v2/_svc/files/search?${mode}=${encodeURIComponent(value)}&next=${
          encodeURIComponent(next!)
        }`,
      );
      setPages([...pages, b.results]);
      setNext(b.next ?? null);
    } catch (e) {
      setMoreError(e);
    }
  };
  if (rows.length === 0 && !next) {
    return <p class="empty">No indexed image holds such a file.</p>;
  }
  if (rows.length === 0) {
    // a pattern's page reads a bounded number of names: none matched yet, more remain
    return (
      <>
        <p class="empty">No match among the names read so far.</p>
        {moreError ? <ErrorState error={moreError} /> : null}
        <button type="button" onClick={more}>Search further</button>
      </>
    );
  }
  return (
    <>
      <table class="list" data-section="search-results">
        <thead>
          <tr>
            <th scope="col">Namespace</th>
            <th scope="col">Image</th>
            <th scope="col">Path</th>
            <th scope="col">Size</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i} data-result={r.namespace}>
              <td>
                <a href={`/${r.namespace}`}>{r.namespace}</a>
              </td>
              <td>
                {r.tags.map((t) => <a key={t} class="tag" href={`/${r.namespace}:${t}`}>{t}</a>)}
                <a class="digest" href={`/${r.namespace}@${r.manifest}`}>
                  {shortDigest(r.manifest)}
                </a>
              </td>
              <td>
                <a
                  href={`/${r.namespace}@${r.manifest}#filesystem/${encodeURI(r.path)}`}
                >
                  <code>{r.path}</code>
                </a>
              </td>
              <td class="num">{humanSize(r.size)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {moreError ? <ErrorState error={moreError} /> : null}
      {next && <button type="button" onClick={more}>Load more</button>}
    </>
  );
}

export function Search() {
  const params = new URLSearchParams(location.search);
  const current = MODES.find((m) => params.has(m)) ?? null;
  const [mode, setMode] = useState<Mode>(current ?? "name");
  const [value, setValue] = useState(current ? params.get(current)! : "");
  const submit = (e: Event) => {
    e.preventDefault();
    if (value.trim()) {
      navigate(`${SEARCH_PATH}?${mode}=${encodeURIComponent(value.trim())}`);
    }
  };
  return (
    <section aria-labelledby="s-title">
      <h1 id="s-title">Find a file</h1>
      <form class="tools" onSubmit={submit} role="search">
        <label>
          By{" "}
          <select
            value={mode}
            onChange={(e) => setMode((e.target as HTMLSelectElement).value as Mode)}
          >
            <option value="name">file name (start, or * and ?)</option>
            <option value="path">full path</option>
            <option value="sha256">content sha256</option>
          </select>
        </label>
        <label>
          Value{" "}
          <input
            type="search"
            value={value}
            placeholder={mode === "name"
              ? "libssl, *.sh, lib*.so.?"
              : mode === "path"
              ? "etc/passwd"
              : "sha256"}
            onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="submit">Search</button>
      </form>
      {current && <Results mode={current} value={params.get(current)!} />}
    </section>
  );
}
