// A verdict as it is stored (bounded whatever the artifacts said) and compared, and the Warning
// header a served image that is not verified carries.
import type { ImageVerdict } from "../signatures/mod.ts";
import type { PusherRecord, SignatureVerdict, StoredSigner } from "../kv/mod.ts";

const SIGNERS_KEPT = 16;
const TEXT_KEPT = 512;

function cut(s: string | undefined | null): string | undefined {
  if (s === undefined || s === null) return undefined;
  return s.length > TEXT_KEPT ? s.slice(0, TEXT_KEPT) + "…" : s;
}

/** A verdict, and whether an index verified through its platforms' own signatures. */
export type Judged = ImageVerdict & { byPlatforms?: boolean };

/** The stored form of a verdict: bounded whatever the artifacts said. */
export function record(
  v: Judged,
  fingerprint: string,
  pushedBy: PusherRecord | null,
): SignatureVerdict {
  const out: SignatureVerdict = {
    state: v.verified ? "verified" : "unverified",
    fingerprint,
    checkedAt: v.checkedAt,
    signers: v.signers.slice(0, SIGNERS_KEPT).map((s) => {
      const o: StoredSigner = {
        format: s.format,
        artifact: s.artifact,
        signer: cut(s.signer) ?? null,
        valid: s.valid,
      };
      const reason = cut(s.reason);
      if (reason !== undefined) o.reason = reason;
      return o;
    }),
    pushedBy,
  };
  if (v.verified && v.byPlatforms) out.byPlatforms = true;
  const reason = cut(v.reason);
  if (!v.verified && reason !== undefined) out.reason = reason;
  return out;
}

export function sameVerdict(a: SignatureVerdict, b: SignatureVerdict): boolean {
  return a.state === b.state && a.fingerprint === b.fingerprint &&
    !!a.held === !!b.held &&
    a.via === b.via && !!a.byPlatforms === !!b.byPlatforms &&
    JSON.stringify(a.signers) === JSON.stringify(b.signers);
}

/** RFC 7234's Warning header value for a served image that is not verified. */
export function warning(text: string): string {
  return `299 - ${JSON.stringify(text.replace(/[^\x20-\x7e]/g, "?").slice(0, 300))}`;
}
