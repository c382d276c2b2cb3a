// @sigstore/verify builds a certificate's path by asking every candidate issuer to verify it,
// once when the signing key is checked and again when the bundle is (X509Certificate.verify:
// an ECDSA check, ~0.5-0.7 ms here), and compares certificates by re-encoding both to DER. For a
// keyless signature that is the same Fulcio intermediate and root checked again and again, the
// most of its ~10 ms. The answer of a signature check is a function of the two certificates'
// bytes alone (the subject's DER holds what was signed, the algorithm and the signature; the
// issuer's, its public key), so it is remembered by their digests (bounded); a certificate's DER
// is encoded once per parsed object.
import { createHash } from "node:crypto";
import { X509Certificate } from "@sigstore/core";

const MARK = Symbol.for("wharf.signatures.certMemo");
/** Signature checks remembered: enough for every CA of a few trusted roots, and leaves in flight. */
export const CERT_CHECKS_KEPT = 4096;

type Cert = X509Certificate & { root: { toDER(): Buffer } };
const proto = X509Certificate.prototype as unknown as Record<string | symbol, unknown>;

const ders = new WeakMap<object, Buffer>();
const ids = new WeakMap<object, string>();
const checks = new Map<string, boolean>();

function der(c: Cert): Buffer {
  let d = ders.get(c);
  if (!d) ders.set(c, d = c.root.toDER());
  return d;
}

function id(c: Cert): string {
  let i = ids.get(c);
  if (!i) ids.set(c, i = createHash("sha256").update(der(c)).digest("hex"));
  return i;
}

if (!proto[MARK]) {
  const verify = proto.verify as (this: Cert, issuer?: Cert) => boolean;
  proto.verify = function (this: Cert, issuer?: Cert): boolean {
    const key = `${id(this)}>${issuer ? id(issuer) : "self"}`;
    const known = checks.get(key);
    if (known !== undefined) return known;
    const ok = verify.call(this, issuer);
    if (checks.size >= CERT_CHECKS_KEPT) checks.delete(checks.keys().next().value!);
    checks.set(key, ok);
    return ok;
  };
  proto.equals = function (this: Cert, other: Cert): boolean {
    return der(this).equals(der(other));
  };
  proto[MARK] = true;
}
