// The OCI tab: what the manifest says — config, layers with sizes, annotations, an index's children
// with platform badges, and the referrers (100 at first; more on request, SPEC UI behaviour 6).
import { useState } from "preact/hooks";
import { apiFetch, checked, nsPath } from "../api.ts";
import { CopyButton } from "../buttons.tsx";
import { useLoad } from "../hooks.ts";
import {
  blobText,
  type Descriptor,
  type FetchedManifest,
  humanSize,
  isIndex,
  platformBadge,
  shortDigest,
} from "../oci.ts";
import { ErrorState, Loading } from "../states.tsx";

function Annotations(
  { annotations }: { annotations?: Record<string, string> },
) {
  const entries = Object.entries(annotations ?? {});
  if (entries.length === 0) return null;
  return (
    <>
      <h2>Annotations</h2>
      <table class="list kv" data-section="annotations">
        <tbody>
          {entries.map(([k, v]) => (
            <tr key={k}>
              <th scope="row">{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Config(
  { namespace, config }: { namespace: string; config: Descriptor },
) {
  const { data, error, reload } = useLoad(
    () => blobText(namespace, config.digest),
    [
      namespace,
      config.digest,
    ],
  );
  let pretty = data ?? "";
  let parsed: Record<string, unknown> | null = null;
  try {
    parsed = data ? JSON.parse(data) : null;
    pretty = JSON.stringify(parsed, null, 2);
  } catch {
    // not JSON (an artifact's config): shown as stored
  }
  const platform = parsed && typeof parsed.os === "string"
    ? platformBadge({
      os: parsed.os as string,
      architecture: String(parsed.architecture ?? ""),
      variant: parsed.variant as string | undefined,
    })
    : null;
  return (
    <>
      <h2>Config</h2>
      <p>
        <code>{config.mediaType}</code> · {humanSize(config.size)} ·{" "}
        <code title={config.digest}>{shortDigest(config.digest)}</code>
        {platform && <span class="badge platform">{platform}</span>}
      </p>
      {error ? <ErrorState error={error} retry={reload} /> : data === null ? <Loading /> : (
        <details>
          <summary>Config document</summary>
          <pre class="json" data-section="config" tabIndex={0}>{pretty}</pre>
        </details>
      )}
    </>
  );
}

interface ReferrersPage {
  items: Descriptor[];
  next: string | null;
}

async function referrersPage(url: string): Promise<ReferrersPage> {
  const r = await checked(
    await apiFetch(url, {
      headers: { accept: "application/vnd.oci.image.index.v1+json" },
    }),
  );
  const body = await r.json() as { manifests?: Descriptor[] };
  const link = r.headers.get("link") ?? "";
  const m = /<([^>]+)>\s*;\s*rel="?next"?/.exec(link);
  return { items: body.manifests ?? [], next: m ? m[1] : null };
}

function Referrers(
  { namespace, digest }: { namespace: string; digest: string },
) {
  const [more, setMore] = useState<Descriptor[]>([]);
  const [next, setNext] = useState<string | null | undefined>(undefined);
  const [moreError, setMoreError] = useState<unknown>(null);
  const first = useLoad(
    () => referrersPage(`/v2/${nsPath(namespace)}/referrers/${digest}`),
    [namespace, digest],
  );
  if (first.error) {
    return <ErrorState error={first.error} retry={first.reload} />;
  }
  if (!first.data) return <Loading />;
  const items = [...first.data.items, ...more];
  const following = next === undefined ? first.data.next : next;
  const loadMore = async () => {
    try {
      const page = await referrersPage(following!);
      setMore([...more, ...page.items]);
      setNext(page.next);
    } catch (e) {
      setMoreError(e);
    }
  };
  if (items.length === 0) return <p class="muted">No referrers.</p>;
  return (
    <>
      <table class="list" data-section="referrers">
        <thead>
          <tr>
            <th scope="col">Artifact type</th>
            <th scope="col">Digest</th>
            <th scope="col">Size</th>
          </tr>
        </thead>
        <tbody>
          {items.map((d) => (
            <tr key={d.digest} data-referrer={d.digest}>
              <td>{d.artifactType ?? d.mediaType}</td>
              <td>
                <a class="digest" href={`/${namespace}@${d.digest}`}>
                  {shortDigest(d.digest)}
                </a>
              </td>
              <td class="num">{humanSize(d.size)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {moreError ? <ErrorState error={moreError} /> : null}
      {following && <button type="button" onClick={loadMore}>Load more referrers</button>}
    </>
  );
}

export function OciTab(
  { namespace, fetched }: { namespace: string; fetched: FetchedManifest },
) {
  const m = fetched.manifest;
  let pretty = fetched.raw;
  try {
    pretty = JSON.stringify(m, null, 2);
  } catch {
    // shown as stored
  }
  return (
    <div data-tab="oci">
      {isIndex(m) && (
        <>
          <h2>Platforms</h2>
          <table class="list" data-section="children">
            <thead>
              <tr>
                <th scope="col">Platform</th>
                <th scope="col">Digest</th>
                <th scope="col">Media type</th>
                <th scope="col">Size</th>
              </tr>
            </thead>
            <tbody>
              {(m.manifests ?? []).map((c) => (
                <tr key={c.digest} data-child={c.digest}>
                  <td>
                    <span class="badge platform">
                      {platformBadge(c.platform)}
                    </span>
                  </td>
                  <td>
                    <a class="digest" href={`/${namespace}@${c.digest}`}>
                      {shortDigest(c.digest)}
                    </a>
                  </td>
                  <td>
                    <code>{c.mediaType}</code>
                  </td>
                  <td class="num">{humanSize(c.size)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {m.config && <Config namespace={namespace} config={m.config} />}
      {m.layers && (
        <>
          <h2>Layers</h2>
          <table class="list" data-section="layers">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Digest</th>
                <th scope="col">Media type</th>
                <th scope="col">Size</th>
              </tr>
            </thead>
            <tbody>
              {m.layers.map((l, i) => (
                <tr key={`${i}${l.digest}`} data-layer={l.digest}>
                  <td>L{i + 1}</td>
                  <td>
                    <code title={l.digest}>{shortDigest(l.digest)}</code>{" "}
                    <CopyButton text={l.digest} />
                  </td>
                  <td>
                    <code>{l.mediaType}</code>
                  </td>
                  <td class="num">{humanSize(l.size)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row" colSpan={3}>Total of the layers</th>
                <td class="num">
                  {humanSize(m.layers.reduce((s, l) => s + (l.size ?? 0), 0))}
                </td>
              </tr>
            </tfoot>
          </table>
        </>
      )}
      {m.subject && (
        <p>
          Refers to{" "}
          <a href={`/${namespace}@${m.subject.digest}`}>
            {shortDigest(m.subject.digest)}
          </a>
        </p>
      )}
      <Annotations annotations={m.annotations} />
      <h2>Referrers</h2>
      <Referrers namespace={namespace} digest={fetched.digest} />
      <h2>Manifest</h2>
      <pre class="json" data-section="manifest" tabIndex={0}>{pretty}</pre>
    </div>
  );
}
