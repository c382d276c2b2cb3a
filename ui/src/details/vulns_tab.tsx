// The Vulnerabilities tab: an image's report (severity counts, findings with filter and sort, CSV
// and SBOM downloads), or an index's per-platform summaries with `#vulnerabilities/<os>/<arch>`
// selecting one platform's report. A report matched against no advisory record says "Not
// checked" and why, with how to load advisory data: never "no known vulnerabilities".
import { useMemo, useState } from "preact/hooks";
import { apiFetch, checked, nsPath } from "../api.ts";
import { downloadFrom } from "../download.ts";
import { useInterval, useLoad } from "../hooks.ts";
import {
  type FetchedManifest,
  isIndex,
  type Platform,
  platformBadge,
  shortDigest,
} from "../oci.ts";
import { ErrorState, Loading } from "../states.tsx";
import { describeSecretKind } from "../secret_kind.tsx";
import { vulnPlatform } from "./tabs.ts";

/** Where OSV's per-ecosystem dumps are described (what `advisories fetch` downloads). */
const OSV_DUMPS = "https://google.github.io/osv.dev/data/#data-dumps";

/** How to get the advisory data a report without findings lacks (docs/scanning.md). */
function AdvisoryHelp() {
  return (
    <details class="advisory-help">
      <summary>How to load advisory data</summary>
      <p>
        Wharf matches packages against{" "}
        <a href={OSV_DUMPS} rel="noreferrer">OSV's dumps</a>. Either let it download them: in the
        config's <code>[scan]</code> set <code>advisories_dir = "./data/advisories"</code> and{" "}
        <code>refresh_interval_secs = 86400</code>; or, offline, run{" "}
        <code>main.ts advisories fetch --dir osv --ecosystem Debian</code>{" "}
        on a connected machine and copy <code>osv/</code> into <code>advisories_dir</code>.{" "}
        <code>main.ts advisories status</code> says what is loaded; details in Wharf's{" "}
        <code>docs/scanning.md</code>.
      </p>
    </details>
  );
}

const FAILED_PREFIX = "advisory download failed: ";

/**
 * The last advisory download failed (offline, the source down): why, and when Wharf tries again,
 * as its warn line and `advisories status` say it. Advisories may be missing or stale meanwhile.
 */
function AdvisoryDownloadNote({ d }: { d: AdvisoryDownload }) {
  const end = d.message.lastIndexOf("; next attempt");
  const cause = d.message.startsWith(FAILED_PREFIX) && end > 0
    ? d.message.slice(FAILED_PREFIX.length, end)
    : d.failed.map((f) => `${f.ecosystem}: ${f.error}`).join("; ");
  return (
    <p class="advisory-download" role="status" data-advisory-download>
      <strong>Advisory download failed</strong> at{" "}
      <time dateTime={d.failed_at}>
        {new Date(d.failed_at).toLocaleString()}
      </time>: {cause}. {d.next_attempt_at
        ? (
          <>
            Wharf tries again at{" "}
            <time dateTime={d.next_attempt_at} data-next-attempt>
              {new Date(d.next_attempt_at).toLocaleString()}
            </time>.
          </>
        )
        : (
          <>
            Nothing downloads on its own: run <code>main.ts advisories fetch</code>.
          </>
        )}
    </p>
  );
}

const SEVERITIES = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN"] as const;
type Counts = Partial<Record<typeof SEVERITIES[number], number>>;
type Sort = "severity" | "package" | "id";

interface Finding {
  id: string;
  aliases: string[];
  severity: string;
  package: string;
  installed: string;
  fixed: string | null;
  summary: string;
  ecosystem: string;
}

interface Report {
  digest: string;
  scanned_at: string;
  refreshing?: boolean;
  platform: Platform | null;
  os: { pretty_name?: string; id?: string; version_id?: string } | null;
  advisories: { snapshot: string; records: number } | null;
  /** false when no advisory record was matched (the server fills it in for older reports) */
  vulnerabilities_checked: boolean;
  not_checked?: string;
  note?: string;
  counts: Counts;
  packages: { name: string; version: string; type: string }[];
  findings: Finding[];
  config_secrets: {
    source: string;
    index: number;
    name?: string;
    kind: string;
  }[];
  warnings: string[];
  /** the last advisory download run's failure, while it failed (docs/api.md) */
  advisory_download?: AdvisoryDownload;
}

interface AdvisoryDownload {
  message: string;
  failed: { ecosystem: string; error: string }[];
  failed_at: string;
  next_attempt_at: string | null;
}

interface IndexSummary {
  digest: string;
  manifests: {
    digest: string;
    platform: Platform | null;
    status: string;
    counts?: Counts;
    vulnerabilities_checked?: false;
    not_checked?: string;
    scanned_at?: string;
  }[];
}

type Answer<T> = { scanning: true } | { scanning: false; body: T };

async function loadReport<T>(
  namespace: string,
  digest: string,
): Promise<Answer<T>> {
  const r = await checked(
    await apiFetch(`/v2/${nsPath(namespace)}/_svc/vulnerabilities/${digest}`, {
      headers: { accept: "application/json" },
    }),
  );
  if (r.status === 202) {
    await r.body?.cancel();
    return { scanning: true };
  }
  return { scanning: false, body: await r.json() as T };
}

/** Why a report was not checked against advisories (the server's reason), or null when it was. */
function notCheckedOf(rep: Report): string | null {
  return rep.vulnerabilities_checked === false
    ? rep.not_checked ?? "no advisory record was matched"
    : null;
}

/** The state of a report not checked: never read as clean, with the reason. */
function NotChecked({ reason, packages }: { reason: string; packages: number }) {
  return (
    <p class="not-checked" role="status" data-not-checked>
      <strong>Not checked: {reason}.</strong>{" "}
      {packages === 1 ? "The 1 package was" : `The ${packages} packages were`}{" "}
      not matched against any advisory: no finding here does not mean no vulnerability.
    </p>
  );
}

function CountsRow({ counts }: { counts: Counts }) {
  return (
    <ul class="severity-counts" aria-label="Findings per severity">
      {SEVERITIES.map((s) => (
        <li key={s} class={`sev sev-${s.toLowerCase()}`} data-severity={s}>
          <span class="sev-name">{s}</span> <strong>{counts[s] ?? 0}</strong>
        </li>
      ))}
    </ul>
  );
}

const RANK: Record<string, number> = {
  CRITICAL: 0,
  HIGH: 1,
  MEDIUM: 2,
  LOW: 3,
  UNKNOWN: 4,
};

function ImageReport(
  { namespace, digest }: { namespace: string; digest: string },
) {
  const { data, error, reload } = useLoad(
    () => loadReport<Report>(namespace, digest),
    [
      namespace,
      digest,
    ],
  );
  useInterval(reload, 2000, data?.scanning === true);
  const [filter, setFilter] = useState("");
  const [sort, setSort] = useState<Sort>("severity");
  const [downloadError, setDownloadError] = useState<unknown>(null);
  const findings = useMemo(() => {
    if (!data || data.scanning) return [];
    const f = filter.trim().toLowerCase();
    const rows = data.body.findings.filter((x) =>
      !f || x.id.toLowerCase().includes(f) ||
      x.package.toLowerCase().includes(f) ||
      x.severity.toLowerCase() === f ||
      (x.summary ?? "").toLowerCase().includes(f) ||
      x.aliases.some((a) => a.toLowerCase().includes(f))
    );
    const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return rows.sort((a, b) =>
      sort === "severity"
        ? (RANK[a.severity] ?? 9) - (RANK[b.severity] ?? 9) ||
          cmp(a.package, b.package) ||
          cmp(a.id, b.id)
        : sort === "package"
        ? cmp(a.package, b.package) || cmp(a.id, b.id)
        : cmp(a.id, b.id)
    );
  }, [data, filter, sort]);
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  if (data.scanning) return <Loading text="Scanning this image…" />;
  const rep = data.body;
  const notChecked = notCheckedOf(rep);
  const base = `/v2/${nsPath(namespace)}/_svc/vulnerabilities/${digest}`;
  const file = digest.replace(":", "-").slice(0, 19);
  const dl = (format: string, name: string) => () =>
    downloadFrom(`${base}?format=${format}`, name).catch(setDownloadError);
  return (
    <div class="report" data-report={digest}>
      <p>
        <span data-os>{osName(rep.os)}</span> · {platformBadge(rep.platform)} · scanned{" "}
        <time dateTime={rep.scanned_at}>
          {new Date(rep.scanned_at).toLocaleString()}
        </time>
        {rep.advisories
          ? ` · advisories ${rep.advisories.snapshot} (${rep.advisories.records} records)`
          : " · no advisories loaded"}
        {rep.refreshing && " · a rescan with newer advisories is running"}
      </p>
      {rep.advisory_download && <AdvisoryDownloadNote d={rep.advisory_download} />}
      {notChecked !== null
        ? (
          <>
            <NotChecked reason={notChecked} packages={rep.packages.length} />
            <AdvisoryHelp />
          </>
        )
        : <CountsRow counts={rep.counts} />}
      <div class="tools">
        <button type="button" onClick={dl("csv", `${file}-findings.csv`)}>
          Download CSV
        </button>
        <button type="button" onClick={dl("cyclonedx", `${file}.cdx.json`)}>
          Download SBOM (CycloneDX)
        </button>
        <button type="button" onClick={dl("spdx", `${file}.spdx.json`)}>
          Download SBOM (SPDX)
        </button>
      </div>
      {downloadError ? <ErrorState error={downloadError} /> : null}
      {rep.warnings.length > 0 && (
        <ul class="warnings" aria-label="Warnings">
          {rep.warnings.map((w, i) => <li key={i}>{w}</li>)}
        </ul>
      )}
      {rep.config_secrets.length > 0 && (
        <>
          <h3>Secrets in the config</h3>
          <ul data-section="config-secrets">
            {rep.config_secrets.map((s, i) => (
              <li key={i} data-kind={s.kind}>
                <code>{s.kind}</code> in {s.source === "env"
                  ? `environment variable ${s.name ?? ""}`
                  : `history line ${s.index + 1}`}
                <span class="secret-what">{describeSecretKind(s.kind)}</span>
              </li>
            ))}
          </ul>
        </>
      )}
      {notChecked === null && (
        <Findings
          all={rep.findings}
          shown={findings}
          packages={rep.packages.length}
          filter={filter}
          setFilter={setFilter}
          sort={sort}
          setSort={setSort}
        />
      )}
      <details>
        <summary>{rep.packages.length} packages</summary>
        <table class="list" data-section="packages">
          <tbody>
            {rep.packages.map((p, i) => (
              <tr key={i}>
                <td>{p.name}</td>
                <td>{p.version}</td>
                <td>{p.type}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </div>
  );
}

/** The findings of a checked report: filter, sort, and the table (or that there are none). */
function Findings(
  { all, shown, packages, filter, setFilter, sort, setSort }: {
    all: Finding[];
    shown: Finding[];
    packages: number;
    filter: string;
    setFilter: (f: string) => void;
    sort: Sort;
    setSort: (s: Sort) => void;
  },
) {
  return (
    <>
      <h3>Findings</h3>
      <div class="tools">
        <label>
          Filter{" "}
          <input
            type="search"
            value={filter}
            placeholder="id, package or severity"
            onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          Sort{" "}
          <select
            value={sort}
            onChange={(e) => setSort((e.target as HTMLSelectElement).value as Sort)}
          >
            <option value="severity">severity</option>
            <option value="package">package</option>
            <option value="id">id</option>
          </select>
        </label>
        <span class="muted">{shown.length} of {all.length}</span>
      </div>
      {all.length === 0
        ? (
          <p class="empty" data-clean>
            No known vulnerabilities in {packages} packages.
          </p>
        )
        : (
          <table class="list" data-section="findings">
            <thead>
              <tr>
                <th scope="col">Severity</th>
                <th scope="col">ID</th>
                <th scope="col">Package</th>
                <th scope="col">Installed</th>
                <th scope="col">Fixed in</th>
                <th scope="col">Summary</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((f) => (
                <tr
                  key={`${f.id}/${f.package}/${f.installed}`}
                  data-finding={f.id}
                >
                  <td>
                    <span class={`sev sev-${f.severity.toLowerCase()}`}>
                      {f.severity}
                    </span>
                  </td>
                  <td>{f.id}</td>
                  <td>{f.package}</td>
                  <td>{f.installed}</td>
                  <td>{f.fixed ?? "no fix"}</td>
                  <td>{f.summary}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </>
  );
}

const platformPath = (p: Platform | null) =>
  p ? [p.os, p.architecture, p.variant].filter(Boolean).join("/") : "unknown";

function IndexReport(
  { namespace, digest, hash }: {
    namespace: string;
    digest: string;
    hash: string;
  },
) {
  const { data, error, reload } = useLoad(
    () => loadReport<IndexSummary>(namespace, digest),
    [
      namespace,
      digest,
    ],
  );
  const scanning = data?.scanning === true ||
    (data?.scanning === false &&
      data.body.manifests.some((m) => m.status === "scanning"));
  useInterval(reload, 2000, scanning);
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  if (data.scanning) return <Loading text="Scanning this index's images…" />;
  const wanted = vulnPlatform(hash).join("/");
  const selected = wanted
    ? data.body.manifests.find((m) => platformPath(m.platform) === wanted)
    : undefined;
  return (
    <>
      <table class="list" data-section="platform-reports">
        <thead>
          <tr>
            <th scope="col">Platform</th>
            <th scope="col">Image</th>
            <th scope="col">Status</th>
            <th scope="col">Findings</th>
          </tr>
        </thead>
        <tbody>
          {data.body.manifests.map((m) => (
            <tr
              key={m.digest}
              data-platform={platformPath(m.platform)}
              aria-current={m === selected ? "true" : undefined}
            >
              <td>
                {m.status === "not-an-image"
                  ? (
                    <span class="badge platform">
                      {platformBadge(m.platform)}
                    </span>
                  )
                  : (
                    <a href={`#vulnerabilities/${platformPath(m.platform)}`}>
                      <span class="badge platform">
                        {platformBadge(m.platform)}
                      </span>
                    </a>
                  )}
              </td>
              <td>
                <code title={m.digest}>{shortDigest(m.digest)}</code>
              </td>
              <td>{m.status}</td>
              <td>
                {m.vulnerabilities_checked === false
                  ? (
                    <span class="not-checked" data-not-checked>
                      Not checked: {m.not_checked ?? "no advisory record was matched"}
                    </span>
                  )
                  : m.counts
                  ? <CountsRow counts={m.counts} />
                  : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {wanted && !selected && <p role="alert">This index has no {wanted} image.</p>}
      {selected && selected.status !== "not-an-image" && (
        <>
          <h2>{platformBadge(selected.platform)}</h2>
          <ImageReport namespace={namespace} digest={selected.digest} />
        </>
      )}
    </>
  );
}

export function VulnerabilitiesTab(
  { namespace, fetched, hash }: {
    namespace: string;
    fetched: FetchedManifest;
    hash: string;
  },
) {
  return (
    <div data-tab="vulnerabilities">
      {isIndex(fetched.manifest)
        ? (
          <IndexReport
            namespace={namespace}
            digest={fetched.digest}
            hash={hash}
          />
        )
        : <ImageReport namespace={namespace} digest={fetched.digest} />}
    </div>
  );
}

/** The report's OS: its pretty name, else its id and version (`alpine 3.20.1`), else unknown. */
export function osName(
  os:
    | { pretty_name?: string; id?: string; version_id?: string }
    | null
    | undefined,
): string {
  if (os?.pretty_name) return os.pretty_name;
  if (os?.id) return os.version_id ? `${os.id} ${os.version_id}` : os.id;
  return "Unknown OS";
}
