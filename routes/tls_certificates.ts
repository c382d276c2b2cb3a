// What a TLS connection says about its client: the subject of a certificate that verified, or
// why one that was presented did not (an X.509 v1 certificate named as such).
import type { TLSSocket } from "node:tls";
import type { CertificateSubject, RefusedCertificate } from "../lib/auth/mod.ts";

/**
 * Only a verified chain becomes an identity. One presented but not verified (possible under
 * `client_auth = "optional"`) is refused with its reason, never served as anonymous.
 */
export function peerSubject(socket: TLSSocket): CertificateSubject | RefusedCertificate | null {
  const c = socket.getPeerCertificate();
  const presented = !!c && c.raw instanceof Uint8Array && c.raw.byteLength > 0;
  if (!socket.authorized) return presented ? { refused: whyUnverified(socket, c.raw) } : null;
  if (!c || !c.subject) return null;
  const s = c.subject as unknown as Record<string, string | string[] | undefined>;
  const subject: CertificateSubject = {
    organizations: list(s.O),
    organizational_units: list(s.OU),
  };
  const cn = Array.isArray(s.CN) ? s.CN[0] : s.CN;
  if (cn !== undefined) subject.common_name = cn;
  return subject;
}

/**
 * The TLS library (rustls/webpki) verifies X.509 v3 certificates only and reports a v1 one as an
 * unverifiable signature; say what is wrong with it instead.
 */
function whyUnverified(socket: TLSSocket, der: Uint8Array): string {
  if (x509Version(der) === 1) {
    return "it is an X.509 v1 certificate (no extensions), which Wharf does not accept; reissue " +
      "it as v3 with extendedKeyUsage = clientAuth (docs/auth.md, mTLS)";
  }
  const code = socket.authorizationError;
  const why = code instanceof Error ? code.message : code ? String(code) : "unverified";
  return `it does not verify against [server.tls] client_ca_bundle (${why})`;
}

/**
 * The version field of a DER certificate: Certificate ::= SEQUENCE { tbsCertificate SEQUENCE {
 * [0] EXPLICIT version DEFAULT v1, ... } }. Null when the bytes are not shaped like one.
 */
function x509Version(der: Uint8Array): number | null {
  // Skips a tag and its length; returns the offset of the contents, or -1.
  const enter = (at: number, tag: number): number => {
    if (der[at] !== tag || at + 1 >= der.length) return -1;
    const first = der[at + 1];
    if (first < 0x80) return at + 2;
    const n = first & 0x7f;
    return n >= 1 && n <= 4 && at + 2 + n <= der.length ? at + 2 + n : -1;
  };
  const tbs = enter(0, 0x30);
  const inner = tbs < 0 ? -1 : enter(tbs, 0x30);
  if (inner < 0 || inner >= der.length) return null;
  if (der[inner] !== 0xa0) return 1;
  const int = enter(inner, 0xa0);
  if (int < 0 || der[int] !== 0x02 || der[int + 1] !== 1) return null;
  return der[int + 2] + 1;
}

function list(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}
