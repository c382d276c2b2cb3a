// `/{namespace}:{tag}` and `/{namespace}@{digest}`: one manifest, its header (digest, sizes, pull
// lines to copy, delete) and its tabs.
import { useEffect, useState } from "preact/hooks";
import { CopyButton, DeleteButton } from "../buttons.tsx";
import { deleteTag, deleteWithCascade } from "../delete.ts";
import { useLoad } from "../hooks.ts";
import {
  fetchManifest,
  hasFilesystem,
  humanSize,
  imageSize,
  isIndex,
  type Manifest,
} from "../oci.ts";
import { COMPARE_PATH, navigate, onLocationChange } from "../route.ts";
import { PageError } from "../not_found.tsx";
import { Loading } from "../states.tsx";
import { FilesystemTab, fsAnchor, parseFsAnchor } from "../filesystem/mod.tsx";
import { HistoryTab } from "./history_tab.tsx";
import { OciTab } from "./oci_tab.tsx";
import { type TabName, tabOf } from "./tabs.ts";
import { VulnerabilitiesTab } from "./vulns_tab.tsx";
import { HeldPage, SignatureFacts } from "../signatures.tsx";
import { ApiError } from "../api.ts";

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => onLocationChange(() => setHash(location.hash)), []);
  return hash;
}

function tabsOf(m: Manifest): TabName[] {
  if (isIndex(m)) return ["oci", "history", "vulnerabilities"];
  return hasFilesystem(m)
    ? ["oci", "history", "vulnerabilities", "filesystem"]
    : ["oci", "history"];
}

const TAB_LABEL: Record<TabName, string> = {
  oci: "OCI",
  history: "Pull history",
  vulnerabilities: "Vulnerabilities",
  filesystem: "Filesystem",
};

export function ManifestDetails(
  { namespace, reference }: { namespace: string; reference: string },
) {
  const hash = useHash();
  const [notice, setNotice] = useState<string | null>(null);
  const { data, error, reload } = useLoad(
    () => fetchManifest(namespace, reference),
    [
      namespace,
      reference,
    ],
  );
  if (error) {
    const refusal = <PageError error={error} retry={reload} />;
    // A held image (issue 34) says so: waiting for a signature, and why.
    if (error instanceof ApiError && error.status === 403) {
      return (
        <HeldPage
          namespace={namespace}
          reference={reference}
          fallback={refusal}
        />
      );
    }
    return refusal;
  }
  if (!data) return <Loading />;
  const byTag = !reference.includes(":");
  const available = tabsOf(data.manifest);
  const tab = tabOf(hash, available);
  const repo = namespace.split("/")[0];
  const host = location.host;
  const pullRef = byTag
    ? `${host}/${namespace}:${reference}`
    : `${host}/${namespace}@${data.digest}`;
  const last = namespace.slice(namespace.lastIndexOf("/") + 1);
  const dockerLine = `docker pull ${pullRef}`;
  const skopeoLine = `skopeo copy docker://${host}/${namespace}@${data.digest} oci:${last}:${
    byTag ? reference : "image"
  }`;
  const removeAll = async () => {
    try {
      const gone = await deleteWithCascade(namespace, data);
      navigate(`/${namespace}`);
      setNotice(
        `Deleted ${gone.length} manifest${gone.length === 1 ? "" : "s"}.`,
      );
    } catch (e) {
      setNotice(`Delete failed: ${failure(e)}`);
    }
  };
  const removeTag = async () => {
    try {
      await deleteTag(namespace, reference);
      navigate(`/${namespace}`);
    } catch (e) {
      setNotice(`Delete failed: ${failure(e)}`);
    }
  };
  return (
    <section aria-labelledby="d-title" data-manifest={data.digest}>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <a href={`/${repo}`}>{repo}</a> /{" "}
        <a href={`/${namespace}`}>{namespace}</a>
      </nav>
      <h1 id="d-title">
        {namespace}
        <span class="ref">{byTag ? `:${reference}` : `@${reference}`}</span>
      </h1>
      <dl class="facts">
        <dt>Digest</dt>
        <dd>
          <code class="digest-full">{data.digest}</code> <CopyButton text={data.digest} />
        </dd>
        <dt>Media type</dt>
        <dd>
          <code>{data.mediaType}</code>
          {data.manifest.artifactType && <span class="badge">{data.manifest.artifactType}</span>}
        </dd>
        <dt>Size</dt>
        <dd>
          {isIndex(data.manifest)
            ? `${humanSize(data.size)} (index)`
            : `${humanSize(imageSize(data))} (manifest, config and layers)`}
        </dd>
        <SignatureFacts namespace={namespace} reference={reference} />
        <dt>Pull</dt>
        <dd class="pull-lines">
          <code>{dockerLine}</code> <CopyButton text={dockerLine} label="Copy docker line" />
          <br />
          <code>{skopeoLine}</code> <CopyButton text={skopeoLine} label="Copy skopeo line" />
        </dd>
      </dl>
      <div class="actions">
        {available.includes("filesystem") && (
          <a
            class="button"
            href={`${COMPARE_PATH}/${namespace}?from=${encodeURIComponent(reference)}`}
          >
            Compare with…
          </a>
        )}
        {byTag && <DeleteButton label="Delete tag" onConfirm={removeTag} />}
        <DeleteButton
          label={isIndex(data.manifest)
            ? "Delete index and its platform images"
            : "Delete manifest"}
          onConfirm={removeAll}
        />
      </div>
      {notice && <p role="status" class="notice">{notice}</p>}
      <div role="tablist" class="tabs" aria-label="Manifest details">
        {available.map((t) => (
          <a
            key={t}
            role="tab"
            aria-selected={t === tab ? "true" : "false"}
            href={t === "oci" ? location.pathname : `#${t}`}
            data-tab-link={t}
          >
            {TAB_LABEL[t]}
          </a>
        ))}
      </div>
      <div role="tabpanel" aria-label={TAB_LABEL[tab]}>
        {tab === "oci" && <OciTab namespace={namespace} fetched={data} />}
        {tab === "history" && <HistoryTab namespace={namespace} reference={reference} />}
        {tab === "vulnerabilities" && (
          <VulnerabilitiesTab
            namespace={namespace}
            fetched={data}
            hash={hash}
          />
        )}
        {tab === "filesystem" && (
          <FilesystemTab
            namespace={namespace}
            layers={(data.manifest.layers ?? []).map((l) => ({
              digest: l.digest,
              size: l.size,
              mediaType: l.mediaType,
            }))}
            route={parseFsAnchor(hash) ?? { path: null, layer: null }}
            navigate={(r) => navigate(location.pathname + fsAnchor(r), true)}
          />
        )}
      </div>
    </section>
  );
}

/** Why a request failed, with the server's reason (an immutable tag names itself there). */
function failure(e: unknown): string {
  if (e instanceof ApiError && e.detail) return `${e.message}: ${e.detail}`;
  return e instanceof Error ? e.message : String(e);
}
