// Signature verdicts in the UI (issue 34): the image page's Signatures facts (verdict, signers,
// why not), the manifests list's badge, and the clear "held: waiting for a signature" page a
// held image shows to anyone who may not pull it yet. Read from
// GET /v2/<namespace>/_svc/signatures/<reference>.
import type { ComponentChildren } from "preact";
import { ApiError, getJson, nsPath } from "./api.ts";
import { useLoad } from "./hooks.ts";

export interface SignerRow {
  format: string;
  artifact: string;
  signer: string | null;
  valid: boolean;
  reason?: string;
}

export interface SignatureStatus {
  namespace: string;
  digest: string;
  mode: "off" | "warn" | "enforce";
  state: "verified" | "unverified" | "artifact" | "unjudged";
  verified: boolean;
  held: boolean;
  reason: string | null;
  checked_at: string | null;
  current: boolean;
  via: string | null;
  by_platforms?: boolean;
  hold:
    | { since: string; until: string; expired: boolean; tags: string[] }
    | null;
  signers: SignerRow[];
}

/** The verdict of `reference`, or null where it cannot be read (an older server, no access). */
export async function fetchSignatures(
  namespace: string,
  reference: string,
): Promise<SignatureStatus | null> {
  try {
    return await getJson<SignatureStatus>(
      `/v2/${nsPath(namespace)}/_svc/signatures/${encodeURIComponent(reference)}`,
    );
  } catch (e) {
    if (e instanceof ApiError && [400, 401, 403, 404].includes(e.status)) {
      return null;
    }
    throw e;
  }
}

/** A revision's signature state in the manifests list. */
export function SignatureBadge({ state }: { state?: string }) {
  if (!state) return null;
  const label = state === "held"
    ? "held: waiting for a signature"
    : state === "unjudged"
    ? "not verified yet"
    : state;
  return <span class={`badge sig sig-${state}`} data-signature={state}>{label}</span>;
}

/** The image page's Signatures row (nothing where the repository verifies nothing). */
export function SignatureFacts(
  { namespace, reference }: { namespace: string; reference: string },
) {
  const { data } = useLoad(() => fetchSignatures(namespace, reference), [
    namespace,
    reference,
  ]);
  if (!data || data.mode === "off" || data.state === "artifact") return null;
  const state = data.held ? "held" : data.state;
  return (
    <>
      <dt>Signatures</dt>
      <dd data-signatures={state}>
        <SignatureBadge state={state} />
        {data.held && data.hold && (
          <span class="muted">
            {data.hold.expired
              ? "its hold ran out; kept until a signature arrives or it is deleted"
              : `until ${new Date(data.hold.until).toLocaleString()}`}
            {data.hold.tags.length > 0 &&
              `; tags waiting: ${data.hold.tags.join(", ")}`}
          </span>
        )}
        {data.reason && <p class="sig-reason">{data.reason}</p>}
        {data.via && (
          <p class="muted">
            covered by the signature of its index <code>{data.via}</code>
          </p>
        )}
        <Signers rows={data.signers} />
        {data.checked_at && (
          <p class="muted">
            checked {new Date(data.checked_at).toLocaleString()}
            {data.current ? "" : " under trust since changed (being checked again)"}
          </p>
        )}
      </dd>
    </>
  );
}

function Signers({ rows }: { rows: SignerRow[] }) {
  if (rows.length === 0) return null;
  return (
    <ul class="signers">
      {rows.map((s) => (
        <li
          key={`${s.artifact}-${s.signer}`}
          data-valid={s.valid ? "true" : "false"}
        >
          <span class={s.valid ? "ok" : "bad"}>
            {s.valid ? "valid" : "not valid"}
          </span>{" "}
          <code>{s.signer ?? "unknown signer"}</code> <span class="muted">({s.format})</span>
          {s.reason && <span class="muted">: {s.reason}</span>}
        </li>
      ))}
    </ul>
  );
}

/**
 * What a 403 on an image page means when the image is held: a page of its own instead of the
 * generic refusal. Null when the image is not held (the caller shows the refusal).
 */
export function HeldPage(
  { namespace, reference, fallback }: {
    namespace: string;
    reference: string;
    fallback: ComponentChildren;
  },
) {
  const { data: loaded, error } = useLoad(
    async () => ({ status: await fetchSignatures(namespace, reference) }),
    [namespace, reference],
  );
  if (!loaded && !error) return null;
  const data = loaded?.status;
  if (error || !data?.held) return <>{fallback}</>;
  return (
    <section aria-labelledby="held-title" data-held={data.digest}>
      <h1 id="held-title">
        {namespace}
        <span class="ref">
          {reference.includes(":") ? `@${reference}` : `:${reference}`}
        </span>
      </h1>
      <p class="notice" role="status">
        <SignatureBadge state="held" />
        This image is held: it is served only once a signature by a trusted key verifies.
      </p>
      <dl class="facts">
        <dt>Digest</dt>
        <dd>
          <code class="digest-full">{data.digest}</code>
        </dd>
        <dt>Why</dt>
        <dd class="sig-reason">{data.reason}</dd>
        {data.hold && (
          <>
            <dt>Held</dt>
            <dd>
              since {new Date(data.hold.since).toLocaleString()}, {data.hold.expired
                ? "its hold ran out (kept held)"
                : `until ${new Date(data.hold.until).toLocaleString()}`}
              {data.hold.tags.length > 0 &&
                `; tags waiting: ${data.hold.tags.join(", ")}`}
            </dd>
          </>
        )}
      </dl>
      <Signers rows={data.signers} />
    </section>
  );
}
