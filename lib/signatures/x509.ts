// Certificate chains of notation signatures (node:crypto's X509Certificate does the parsing and
// the signature checks): leaf first, each issued and signed by the next, ending at (or issued
// by) a configured trust-store certificate, every one valid at the time of verification.
import { X509Certificate } from "node:crypto";
import { AsnConvert } from "@peculiar/asn1-schema";
import {
  Certificate,
  ExtendedKeyUsage,
  id_ce_extKeyUsage,
  id_ce_keyUsage,
  KeyUsage,
  KeyUsageFlags,
} from "@peculiar/asn1-x509";
import { parseDn } from "../config/mod.ts";
import { LIMITS, Refused } from "./limits.ts";

const CODE_SIGNING = "1.3.6.1.5.5.7.3.3";
const roots = new Map<string, X509Certificate>();

function rootCert(pem: string): X509Certificate {
  let c = roots.get(pem);
  if (!c) {
    c = new X509Certificate(pem);
    roots.set(pem, c);
  }
  return c;
}

/** Parses the DER certificates of an envelope (leaf first); Refused past the bounds. */
export function parseChain(der: Uint8Array[]): X509Certificate[] {
  if (der.length === 0) throw new Refused("the envelope carries no certificate");
  if (der.length > LIMITS.certificates) {
    throw new Refused(`the certificate chain has more than ${LIMITS.certificates} certificates`);
  }
  return der.map((d, i) => {
    try {
      return new X509Certificate(d);
    } catch {
      throw new Refused(`certificate ${i} of the chain is not an x509 certificate`);
    }
  });
}

/** The leaf's subject DN as "C=US, O=Acme, CN=x". */
export function subjectDn(c: X509Certificate): string {
  return c.subject.split("\n").join(", ");
}

/**
 * Checks the chain against the trust store (PEM roots) at `now`; Refused with the reason.
 * Returns the leaf.
 */
export function verifyChain(
  chain: X509Certificate[],
  trustStore: string[],
  now: Date,
): X509Certificate {
  const who = `notation:${subjectDn(chain[0])}`;
  const at = now.getTime();
  for (const [i, c] of chain.entries()) {
    const from = Date.parse(c.validFrom);
    const to = Date.parse(c.validTo);
    if (!(from <= at && at <= to)) {
      throw new Refused(
        `certificate ${i === 0 ? "" : `${i} `}(${subjectDn(c)}) expired or not yet valid: valid ${
          new Date(from).toISOString()
        } to ${new Date(to).toISOString()}`,
        who,
      );
    }
    if (i > 0 && !c.ca) throw new Refused(`certificate ${i} of the chain is not a CA`, who);
    if (i + 1 < chain.length && !issuedBy(c, chain[i + 1])) {
      throw new Refused(`certificate ${i} is not signed by certificate ${i + 1} of the chain`, who);
    }
  }
  const leaf = chain[0];
  if (leaf.ca) throw new Refused("the signing certificate is a CA certificate", who);
  const usage = leafUsage(leaf);
  if (usage.keyUsage !== null && !(usage.keyUsage & KeyUsageFlags.digitalSignature)) {
    throw new Refused("the signing certificate's key usage excludes digital signatures", who);
  }
  if (usage.extended !== null && !usage.extended.includes(CODE_SIGNING)) {
    throw new Refused("the signing certificate is not for code signing", who);
  }
  const top = chain[chain.length - 1];
  const anchored = trustStore.some((pem) => {
    const r = rootCert(pem);
    if (r.raw.equals(top.raw)) return true;
    const from = Date.parse(r.validFrom);
    const to = Date.parse(r.validTo);
    return from <= at && at <= to && issuedBy(top, r);
  });
  if (!anchored) throw new Refused("the certificate chain does not end at a trusted root", who);
  return leaf;
}

/**
 * The leaf's key usage bits and extended key usages (null when absent). Read with
 * @peculiar/asn1-x509: node:crypto's `keyUsage` means extended key usages in Node but key usage
 * names in Deno.
 */
function leafUsage(c: X509Certificate): { keyUsage: number | null; extended: string[] | null } {
  const out = { keyUsage: null as number | null, extended: null as string[] | null };
  try {
    for (const ext of AsnConvert.parse(c.raw, Certificate).tbsCertificate.extensions ?? []) {
      if (ext.extnID === id_ce_keyUsage) {
        out.keyUsage = AsnConvert.parse(ext.extnValue, KeyUsage).toNumber();
      } else if (ext.extnID === id_ce_extKeyUsage) {
        out.extended = AsnConvert.parse(ext.extnValue, ExtendedKeyUsage).map(String);
      }
    }
  } catch {
    throw new Refused("the signing certificate's extensions cannot be read");
  }
  return out;
}

/** Issued (names match: Deno's checkIssued refuses a self-signed certificate) and signed by. */
function issuedBy(c: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return c.issuer === issuer.subject && c.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/** The certificate's subject as attribute (upper case) → value. */
function subjectMap(c: X509Certificate): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of c.subject.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) out.set(line.slice(0, eq).trim().toUpperCase(), line.slice(eq + 1).trim());
  }
  return out;
}

/** Whether the leaf's subject is one of the identities: every attribute a pattern names equal. */
export function identityAccepted(leafCert: X509Certificate, identities: string[]): boolean {
  const leaf = subjectMap(leafCert);
  return identities.some((id) => {
    if (id === "*") return true;
    const want = parseDn(id);
    return !!want && [...want].every(([k, v]) => leaf.get(k) === v);
  });
}
