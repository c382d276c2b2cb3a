// The pure rules of verified-before-visible (issue 34): which manifests are signature artifacts
// (never held themselves), which subject an artifact signs, which image a viewer may see, and
// how an index's platform rule reads its children's verdicts. No I/O here.
import { INDEX_TYPES, type ParsedManifest, type Platform } from "../oci/mod.ts";
import type { SignatureFormat } from "../signatures/mod.ts";
import type { PusherRecord, SignatureVerdict } from "../kv/mod.ts";

/** cosign's tag-based signature of `sha256:<hex>` (skopeo and podman write the same). */
export const COSIGN_SIG_TAG = /^sha256-([0-9a-f]{64})\.sig$/;
/**
 * cosign's tags beside an image (signatures, attestations, SBOMs) and the OCI referrers fallback
 * tag (`sha256-<hex>`, an index of an image's referrers).
 */
const COSIGN_ARTIFACT_TAG = /^sha256-([0-9a-f]{64})(\.(sig|att|sbom))?$/;
const SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json";
const DSSE = "application/vnd.dsse.envelope.v1+json";
const BUNDLE_PREFIX = "application/vnd.dev.sigstore.bundle";
const NOTATION = "application/vnd.cncf.notary.signature";

/** The identity of a request, as far as holds care. */
export interface ViewerIdentity {
  provider?: string;
  id?: string;
  username?: string;
}

/** Who asks for an image: the pusher of a held one, and roles granted `get-held`, may see it. */
export interface Viewer {
  identity: ViewerIdentity;
  /** whether the access policies grant `get-held` on `ns@digest` (an explicit grant) */
  mayViewHeld(ns: string, digest: string): boolean;
}

/** The tag cosign writes a signature of `digest` under (sha256 only), or null. */
export function cosignSignatureTag(digest: string): string | null {
  const m = /^sha256:([0-9a-f]{64})$/.exec(digest);
  return m ? `sha256-${m[1]}.sig` : null;
}

/**
 * Whether a pushed manifest is a signature, attestation or other artifact about another image
 * (a referrer, a cosign `.sig`/`.att`/`.sbom` tag, simple-signing or DSSE layers): those are
 * never held, since nothing signs a signature.
 */
export function isArtifact(parsed: ParsedManifest, tags: readonly string[]): boolean {
  if (parsed.subject) return true;
  if (tags.some((t) => COSIGN_ARTIFACT_TAG.test(t))) return true;
  if (parsed.artifactType?.startsWith(BUNDLE_PREFIX) || parsed.artifactType === NOTATION) {
    return true;
  }
  return parsed.layers.length > 0 &&
    parsed.layers.every((l) => l.mediaType === SIMPLE_SIGNING || l.mediaType === DSSE);
}

/** The digests a pushed artifact signs (its subject, a cosign `.sig` tag's image). */
export function signedSubjects(parsed: ParsedManifest, tags: readonly string[]): string[] {
  const out = new Set<string>();
  if (parsed.subject) out.add(parsed.subject);
  for (const t of tags) {
    const m = COSIGN_SIG_TAG.exec(t);
    if (m) out.add(`sha256:${m[1]}`);
  }
  return [...out];
}

/** The format of a referrer, by its artifact or media type; null: not a signature. */
export function referrerFormat(
  artifactType: string | undefined,
  mediaType: string,
): SignatureFormat | null {
  const t = artifactType ?? mediaType;
  if (t.startsWith(BUNDLE_PREFIX)) return "sigstore-bundle";
  if (t === NOTATION) return "notation";
  return null;
}

/** Whether `identity` is the (non-anonymous) identity that pushed the held image. */
export function isPusher(by: PusherRecord | null | undefined, identity: ViewerIdentity): boolean {
  if (!by || by.provider === "anonymous" || identity.provider !== by.provider) return false;
  if (by.id !== undefined) return identity.id === by.id;
  return by.username !== undefined && identity.username === by.username;
}

/** The pusher a held image records: null for anonymous (nobody is exempt then). */
export function pusherOf(identity: ViewerIdentity | null | undefined): PusherRecord | null {
  if (!identity || !identity.provider || identity.provider === "anonymous") return null;
  if (identity.id === undefined && identity.username === undefined) return null;
  const out: PusherRecord = { provider: identity.provider };
  if (identity.id !== undefined) out.id = identity.id;
  if (identity.username !== undefined) out.username = identity.username;
  return out;
}

/** Whether a verdict lets anyone see the image (warn mode aside). */
export function isVisible(v: SignatureVerdict | null): boolean {
  return v?.state === "verified" || v?.state === "artifact";
}

export function isIndex(mediaType: string): boolean {
  return INDEX_TYPES.has(mediaType);
}

export function platformString(p: Platform | undefined): string | null {
  if (!p) return null;
  return p.variant ? `${p.os}/${p.architecture}/${p.variant}` : `${p.os}/${p.architecture}`;
}
