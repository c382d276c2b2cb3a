// The open file: its entry's facts, a download button, and what its content is: a text preview
// with line numbers and the secret lines marked (the first 512 KiB of a larger file, read with a
// Range request: SPEC §Limits), an image, the ELF facts or the certificates of the details
// endpoint. Bytes come through apiFetch (bearer token, X-Svc-No-Redirect) into object URLs, so
// they work when signed in.
import { useEffect, useState } from "preact/hooks";
import { apiFetch, checked, getJson } from "../api.ts";
import { downloadFrom } from "../download.ts";
import { ErrorState, Loading } from "../states.tsx";
import { describeSecretKind, SecretKind } from "../secret_kind.tsx";
import { fileUrl, layerUrl } from "./load.ts";
import { formatSize, type FsNode, liveVersion, modeString, type Version } from "./model.ts";

export const PREVIEW_LIMIT = 512 * 1024;
const IMAGE_LIMIT = 16 << 20;
const DAY = 86_400_000;

interface Props {
  namespace: string;
  digests: string[];
  node: FsNode;
  version: Version | null;
}

function useLoad<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
) {
  const [state, setState] = useState<
    { value?: T; error?: unknown; tick: number }
  >({ tick: 0 });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    setState({ tick });
    load(ac.signal).then(
      (value) => !ac.signal.aborted && setState({ value, tick }),
      (error) => !ac.signal.aborted && setState({ error, tick }),
    );
    return () => ac.abort();
  }, [...deps, tick]);
  return { ...state, retry: () => setTick((t) => t + 1) };
}

export function FilePane({ namespace, digests, node, version }: Props) {
  if (!version) {
    return (
      <div class="fs-pane">
        <h3 class="fs-pane-title">{node.path}</h3>
        <p class="muted">
          A directory no layer lists itself; its {node.children?.length ?? 0}{" "}
          entries come from paths below it.
        </p>
      </div>
    );
  }
  const e = version.entry;
  const digest = digests[version.layer];
  const mime = e.content?.mime_type ?? "";
  const live = liveVersion(node) === version;
  const gone = !live && version.how !== "updated"
    ? `${version.how} by L${version.hiddenBy + 1}`
    : !live
    ? `updated by L${version.hiddenBy + 1}`
    : null;
  const isFile = e.kind === "file" || e.kind === "hardlink";
  const certLike = mime === "application/x-pem-file" ||
    /\.(crt|pem|cer)$/i.test(node.path);
  return (
    <div class="fs-pane" data-path={node.path} data-layer={version.layer + 1}>
      <h3 class="fs-pane-title">
        {gone ? <s>{node.path}</s> : node.path} <span class="badge">L{version.layer + 1}</span>
      </h3>
      {gone ? <p class="fs-gone-note">This version was {gone}.</p> : null}
      <dl class="fs-facts">
        <dt>Kind</dt>
        <dd>{e.kind}</dd>
        {e.kind === "file"
          ? (
            <>
              <dt>Size</dt>
              <dd>{formatSize(e.size)} ({e.size} bytes)</dd>
            </>
          )
          : null}
        <dt>Mode</dt>
        <dd>
          <code>{modeString(e)}</code> ({(e.mode & 0o7777).toString(8).padStart(4, "0")})
        </dd>
        <dt>Owner</dt>
        <dd>{e.uid}:{e.gid}</dd>
        <dt>Modified</dt>
        <dd>{new Date(e.mtime * 1000).toISOString()}</dd>
        {e.link_target
          ? (
            <>
              <dt>Link target</dt>
              <dd>{e.link_target}</dd>
            </>
          )
          : null}
        {e.capabilities?.length
          ? (
            <>
              <dt>Capabilities</dt>
              <dd>{e.capabilities.join(", ")}</dd>
            </>
          )
          : null}
        {mime
          ? (
            <>
              <dt>Type</dt>
              <dd>{mime}</dd>
            </>
          )
          : null}
        {e.content
          ? (
            <>
              <dt>SHA-256</dt>
              <dd class="fs-hash">{e.content.sha256}</dd>
            </>
          )
          : null}
        <dt>Layer</dt>
        <dd class="fs-hash">L{version.layer + 1} {digest}</dd>
      </dl>
      {isFile
        ? (
          <DownloadButton
            namespace={namespace}
            digest={digest}
            path={node.path}
          />
        )
        : null}
      {e.kind !== "file" ? null : mime.startsWith("image/")
        ? (
          <ImagePreview
            namespace={namespace}
            digest={digest}
            path={node.path}
            size={e.size}
          />
        )
        : mime === "application/x-executable"
        ? <Details namespace={namespace} digest={digest} path={node.path} />
        : mime === "application/octet-stream"
        ? (
          <p class="muted">
            Binary content: no preview. Download it to look inside.
          </p>
        )
        : (
          <>
            {certLike
              ? (
                <Details
                  namespace={namespace}
                  digest={digest}
                  path={node.path}
                  previewId="fs-preview"
                />
              )
              : null}
            <TextPreview
              namespace={namespace}
              digest={digest}
              path={node.path}
              size={e.size}
              secrets={e.content?.secrets ?? []}
            />
          </>
        )}
    </div>
  );
}

function DownloadButton(
  p: { namespace: string; digest: string; path: string },
) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const name = p.path.slice(p.path.lastIndexOf("/") + 1) || "file";
  const download = async () => {
    setBusy(true);
    setError(null);
    try {
      await downloadFrom(fileUrl(p.namespace, p.digest, p.path, true), name);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="fs-actions">
      <button
        type="button"
        class="fs-download"
        onClick={download}
        disabled={busy}
      >
        {busy ? "Downloading…" : `Download ${name}`}
      </button>
      {error ? <ErrorState error={error} retry={download} /> : null}
    </div>
  );
}

function TextPreview(
  p: {
    namespace: string;
    digest: string;
    path: string;
    size: number;
    secrets: { kind: string; line: number }[];
  },
) {
  const cut = p.size > PREVIEW_LIMIT;
  const s = useLoad(async (signal) => {
    const headers: HeadersInit = cut ? { range: `bytes=0-${PREVIEW_LIMIT - 1}` } : {};
    const r = await checked(
      await apiFetch(fileUrl(p.namespace, p.digest, p.path), {
        headers,
        signal,
      }),
    );
    const bytes = new Uint8Array(await r.arrayBuffer());
    // A server ignoring the range would send it all: the preview stays at the limit either way.
    return new TextDecoder().decode(bytes.subarray(0, PREVIEW_LIMIT));
  }, [p.namespace, p.digest, p.path]);
  if (s.error) return <ErrorState error={s.error} retry={s.retry} />;
  if (s.value === undefined) return <Loading />;
  const lines = s.value.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  const marks = new Map<number, string[]>();
  for (const x of p.secrets) {
    marks.set(x.line, [...(marks.get(x.line) ?? []), x.kind]);
  }
  return (
    <div class="fs-preview-wrap">
      {cut
        ? (
          <p class="fs-cut" role="note">
            Showing the first 512 KiB of {formatSize(p.size)} ({p.size}{" "}
            bytes). Download the file for the rest.
          </p>
        )
        : null}
      {p.secrets.length
        ? (
          <div class="fs-secret-summary">
            <p>
              {p.secrets.length} secret{p.secrets.length > 1 ? "s" : ""} found:
            </p>
            <ul>
              {p.secrets.map((x, i) => (
                <li key={i} data-line={x.line}>
                  line {x.line}: <SecretKind kind={x.kind} />
                </li>
              ))}
            </ul>
          </div>
        )
        : null}
      <div
        class="fs-code"
        id="fs-preview"
        role="region"
        aria-label={`Preview of ${p.path}`}
        tabIndex={0}
      >
        {lines.map((text, i) => {
          const kinds = marks.get(i + 1);
          return (
            <div
              class={kinds ? "fs-line secret" : "fs-line"}
              data-line={i + 1}
              key={i}
            >
              <span class="fs-lno" aria-hidden="true">{i + 1}</span>
              <span class="fs-ltx">{text}</span>
              {kinds
                ? (
                  <span
                    class="fs-secret-tag"
                    title={kinds.map(describeSecretKind).join("\n")}
                  >
                    secret: {kinds.join(", ")}
                  </span>
                )
                : null}
            </div>
          );
        })}
      </div>
    </div>
  );
}

function ImagePreview(
  p: { namespace: string; digest: string; path: string; size: number },
) {
  const s = useLoad(async (signal) => {
    if (p.size > IMAGE_LIMIT) return null;
    const r = await checked(
      await apiFetch(fileUrl(p.namespace, p.digest, p.path), { signal }),
    );
    return URL.createObjectURL(await r.blob());
  }, [p.namespace, p.digest, p.path]);
  useEffect(() => () => {
    if (s.value) URL.revokeObjectURL(s.value);
  }, [s.value]);
  if (s.error) return <ErrorState error={s.error} retry={s.retry} />;
  if (s.value === undefined) return <Loading />;
  if (s.value === null) {
    return <p class="muted">The image is too large to preview.</p>;
  }
  return <img class="fs-image" src={s.value} alt={`Image ${p.path}`} />;
}

interface Elf {
  [k: string]: unknown;
}
interface CertBlock {
  label: string;
  certificate?: {
    subject: string;
    issuer: string;
    not_before: string;
    not_after: string;
    names: string[];
  };
}

// SPEC's elf fields first, in its order, then what docs/api.md adds; anything else after.
const ELF_FIELDS: [string, string][] = [
  ["type", "Type"],
  ["machine", "Machine"],
  ["bits", "Bits"],
  ["endian", "Endianness"],
  ["entry", "Entry point"],
  ["interpreter", "Interpreter"],
  ["dynamic", "Dynamically linked"],
  ["needed", "Needed libraries"],
  ["soname", "SONAME"],
  ["build_id", "Build ID"],
  ["relro", "RELRO"],
  ["executable_stack", "Executable stack"],
  ["pie", "PIE"],
  ["stack_canary", "Stack canary"],
  ["rpath", "RPATH"],
  ["runpath", "RUNPATH"],
  ["stripped", "Stripped"],
  ["fortified", "Fortified functions"],
  ["partial", "Partial"],
  ["error", "Error"],
];

function show(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (Array.isArray(v)) return v.length ? v.join(", ") : "none";
  return String(v);
}

/** How a hardening fact reads: `bad`, `weak` or null. */
function hardening(key: string, v: unknown): "bad" | "weak" | null {
  if (key === "executable_stack") return v === true ? "bad" : null;
  if (key === "relro") {
    return v === "none" ? "bad" : v === "partial" ? "weak" : null;
  }
  if (key === "pie" || key === "stack_canary") {
    return v === false ? "weak" : null;
  }
  return null;
}

function Details(
  p: { namespace: string; digest: string; path: string; previewId?: string },
) {
  const s = useLoad(
    (signal) =>
      getJson<{ elf?: Elf; certificates?: CertBlock[] }>(
        `${layerUrl(p.namespace, p.digest, "details")}?path=${encodeURIComponent(p.path)}`,
      ).then((x) => (signal.aborted ? {} : x)),
    [p.namespace, p.digest, p.path],
  );
  if (s.error) return <ErrorState error={s.error} retry={s.retry} />;
  if (s.value === undefined) return <Loading />;
  const { elf, certificates } = s.value;
  if (elf) {
    const keys = [
      ...ELF_FIELDS.filter(([k]) => k in elf),
      ...Object.keys(elf).filter((k) => !ELF_FIELDS.some(([f]) => f === k)).map(
        (k) => [k, k],
      ),
    ];
    return (
      <table class="fs-table fs-elf">
        <caption>ELF</caption>
        <tbody>
          {keys.map(([k, label]) => {
            const h = hardening(k, elf[k]);
            return (
              <tr data-field={k} key={k} class={h ?? undefined}>
                <th scope="row">{label}</th>
                <td>
                  {show(elf[k])}
                  {h
                    ? (
                      <span class={`fs-flag ${h}`}>
                        {h === "bad" ? " (unsafe)" : " (weak)"}
                      </span>
                    )
                    : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    );
  }
  if (certificates) {
    return <Certificates blocks={certificates} previewId={p.previewId} />;
  }
  return null;
}

/** Certificates shown before the rest fold away (a CA bundle holds ~150). */
export const CERTS_SHOWN = 3;

type CertFlag = "expired" | "expiring" | "not-yet-valid" | null;

function certFlag(
  c: NonNullable<CertBlock["certificate"]>,
  now: number,
): CertFlag {
  const end = Date.parse(c.not_after);
  const start = Date.parse(c.not_before);
  return end < now
    ? "expired"
    : end - now < 30 * DAY
    ? "expiring"
    : start > now
    ? "not-yet-valid"
    : null;
}

function CertTable(
  { b, i, flag }: { b: CertBlock; i: number; flag: CertFlag },
) {
  const c = b.certificate;
  if (!c) return <p class="fs-cert-other">Block {i + 1}: {b.label}</p>;
  return (
    <table class="fs-table fs-cert" data-cert={i} data-flag={flag ?? "valid"}>
      <caption>
        Certificate {i + 1} {flag === "expired"
          ? <span class="fs-flag bad">expired</span>
          : flag === "expiring"
          ? <span class="fs-flag weak">expires within 30 days</span>
          : flag === "not-yet-valid"
          ? <span class="fs-flag weak">not yet valid</span>
          : <span class="fs-flag ok">valid</span>}
      </caption>
      <tbody>
        <tr data-field="subject">
          <th scope="row">Subject</th>
          <td>{c.subject}</td>
        </tr>
        <tr data-field="issuer">
          <th scope="row">Issuer</th>
          <td>{c.issuer}</td>
        </tr>
        <tr data-field="not_before">
          <th scope="row">Valid from</th>
          <td>{c.not_before}</td>
        </tr>
        <tr data-field="not_after">
          <th scope="row">Valid until</th>
          <td>{c.not_after}</td>
        </tr>
        <tr data-field="names">
          <th scope="row">Names</th>
          <td>{show(c.names)}</td>
        </tr>
      </tbody>
    </table>
  );
}

/**
 * The first few certificates, then the rest folded (a bundle's 144 tables made a 28,800 px page
 * with the text preview at its bottom); the counts of expired and expiring ones stay in view, and
 * a link jumps to the preview.
 */
function Certificates(
  { blocks, previewId }: { blocks: CertBlock[]; previewId?: string },
) {
  const now = Date.now();
  const flags = blocks.map((
    b,
  ) => (b.certificate ? certFlag(b.certificate, now) : null));
  const certs = blocks.filter((b) => b.certificate).length;
  const expired = flags.filter((f) => f === "expired").length;
  const expiring = flags.filter((f) => f === "expiring").length;
  const rest = blocks.length - CERTS_SHOWN;
  return (
    <div class="fs-certs" data-certs={certs}>
      <p class="fs-cert-summary">
        {certs} certificate{certs === 1 ? "" : "s"}
        {expired ? <span class="fs-flag bad">, {expired} expired</span> : null}
        {expiring
          ? (
            <span class="fs-flag weak">
              , {expiring} expiring within 30 days
            </span>
          )
          : null}
        {rest > 0 && previewId
          ? (
            <>
              {" · "}
              <a
                href={`#${previewId}`}
                onClick={(e) => {
                  e.preventDefault();
                  document.getElementById(previewId)?.focus();
                }}
              >
                Go to the text
              </a>
            </>
          )
          : null}
      </p>
      {blocks.slice(0, CERTS_SHOWN).map((b, i) => (
        <CertTable
          key={i}
          b={b}
          i={i}
          flag={flags[i]}
        />
      ))}
      {rest > 0
        ? (
          <details class="fs-cert-more">
            <summary>
              Show the other {rest} block{rest === 1 ? "" : "s"}
            </summary>
            {blocks.slice(CERTS_SHOWN).map((b, k) => (
              <CertTable
                key={k}
                b={b}
                i={CERTS_SHOWN + k}
                flag={flags[CERTS_SHOWN + k]}
              />
            ))}
          </details>
        )
        : null}
    </div>
  );
}
