// PEM blocks of a layer file and the certificates among them (SPEC §Layer file details,
// `certificates`; §Limits: the BEGIN line within the first 64 KiB, blocks within the first
// 4 MiB), and the "opens with a PEM block" test of mime_type rule 2.
//
// X.509 parser: `@peculiar/asn1-x509` (the RFC 5280 schema under @peculiar/x509) on
// `@peculiar/asn1-schema`. Measured under Deno 2.9 on this machine, parsing the 144
// certificates of /etc/ssl/certs/ca-certificates.crt and reading subject, issuer, validity and
// SANs (warm average of 20 runs / first run in a fresh process):
//   @peculiar/asn1-x509 2.11.1   43 ms /  86 ms   all 144 parsed
//   pkijs 4.0.0 + asn1js         78 ms / 122 ms   all 144
//   @peculiar/x509 2.2.0         88 ms / 134 ms   all 144; needs a global `reflect-metadata`
//   node-forge 1.4.3             17 ms            fails 35 of 144 ("OID is not RSA": EC keys)
//   node:crypto X509Certificate   2 ms            all 144, but only OpenSSL's legacy
//                                                 one-line-per-attribute text: multi-valued
//                                                 RDNs, escaping and value types are lost
// asn1-x509 is the fastest that is both correct and structured (the name's RDNs with their
// string types, SANs as typed GeneralNames), which the RFC 4514 strings below need.
import { AsnConvert } from "@peculiar/asn1-schema";
import {
  type AttributeTypeAndValue,
  Certificate,
  id_ce_subjectAltName,
  type Name,
  SubjectAlternativeName,
} from "@peculiar/asn1-x509";

export interface PemBlock {
  label: string;
  certificate?: {
    subject: string;
    issuer: string;
    not_before: string;
    not_after: string;
    names: string[];
  };
}

const CERT_HEAD = 64 * 1024;
const BLOCKS_MAX = 4 * 1024 * 1024;

// latin1: one char per byte, so string offsets are byte offsets and no byte is rejected
const latin1 = new TextDecoder("latin1");

// Blanks around the marker are tolerated the way OpenSSL's reader tolerates them: bundles
// written by hand or pasted into YAML are often indented.
const BEGIN_CERT = /^[ \t]*-----BEGIN CERTIFICATE-----[ \t]*\r?$/m;
const MARKER = /^[ \t]*-----(BEGIN|END) ([^\r\n]*?)-----[ \t]*\r?$/gm;
const OPENS = /^(?:\xef\xbb\xbf)?\s*-----BEGIN ([^\r\n]*?)-----[ \t]*(?:\r?\n|$)/;

/** mime_type rule 2: the first non-blank line is a PEM BEGIN line (a UTF-8 BOM is skipped). */
export function opensWithPem(head: Uint8Array): boolean {
  return OPENS.test(latin1.decode(head.subarray(0, CERT_HEAD)));
}

/** Whether the first 64 KiB hold a `-----BEGIN CERTIFICATE-----` line (pemBlocks is not null). */
export function hasCertificate(head64k: Uint8Array): boolean {
  return BEGIN_CERT.test(latin1.decode(head64k.subarray(0, CERT_HEAD)));
}

/** How many `-----BEGIN ` markers the bytes hold: what parsing them will cost. */
export function beginMarkers(bytes: Uint8Array): number {
  const needle = [0x2d, 0x2d, 0x2d, 0x2d, 0x2d, 0x42, 0x45, 0x47, 0x49, 0x4e]; // -----BEGIN
  let n = 0;
  for (let at = bytes.indexOf(0x2d); at >= 0; at = bytes.indexOf(0x2d, at + 1)) {
    let k = 0;
    while (k < needle.length && bytes[at + k] === needle[k]) k++;
    if (k === needle.length) {
      n++;
      at += k - 1;
    }
  }
  return n;
}

/**
 * SPEC certificates: null unless the first 64 KiB hold a `-----BEGIN CERTIFICATE-----` line;
 * otherwise every PEM block of the first 4 MiB in order. A block whose END line is missing or
 * names another label (a bundle cut at 4 MiB, a broken file) is listed by its label alone, as
 * is any block that does not decode to a certificate.
 */
export function pemBlocks(head64k: Uint8Array, first4MiB: Uint8Array): PemBlock[] | null {
  if (!BEGIN_CERT.test(latin1.decode(head64k.subarray(0, CERT_HEAD)))) return null;
  const text = latin1.decode(first4MiB.subarray(0, BLOCKS_MAX));
  const out: PemBlock[] = [];
  let open: { label: string; body: number } | null = null;
  for (const m of text.matchAll(MARKER)) {
    const [, what, label] = m;
    if (what === "BEGIN") {
      if (open) out.push({ label: open.label });
      open = { label, body: m.index + m[0].length };
    } else if (open) {
      out.push(
        label === open.label ? block(open.label, text.slice(open.body, m.index)) : {
          label: open.label,
        },
      );
      open = null;
    }
  }
  if (open) out.push({ label: open.label });
  return out;
}

function block(label: string, body: string): PemBlock {
  if (label !== "CERTIFICATE") return { label };
  try {
    return { label, certificate: certificate(base64(body)) };
  } catch {
    return { label };
  }
}

function base64(body: string): Uint8Array<ArrayBuffer> {
  const b64 = body.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) {
    throw new Error("not base64");
  }
  return Uint8Array.fromBase64(b64);
}

function certificate(der: Uint8Array<ArrayBuffer>): NonNullable<PemBlock["certificate"]> {
  const tbs = AsnConvert.parse(der, Certificate).tbsCertificate;
  const names: string[] = [];
  const san = tbs.extensions?.find((e) => e.extnID === id_ce_subjectAltName);
  if (san) {
    // a SAN extension that does not decode leaves the rest of the certificate readable
    try {
      for (const g of AsnConvert.parse(san.extnValue, SubjectAlternativeName)) {
        if (g.dNSName !== undefined) names.push(g.dNSName);
        else if (g.iPAddress !== undefined && /^\d+\.\d+\.\d+\.\d+$/.test(g.iPAddress)) {
          names.push(g.iPAddress);
        }
      }
    } catch {
      names.length = 0;
    }
  }
  return {
    subject: rfc4514(tbs.subject),
    issuer: rfc4514(tbs.issuer),
    not_before: rfc3339(tbs.validity.notBefore.getTime()),
    not_after: rfc3339(tbs.validity.notAfter.getTime()),
    names,
  };
}

const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d+Z$/, "Z");

// OpenSSL's short names (XN_FLAG_FN_SN), so a string equals `openssl x509 -nameopt RFC2253`'s
// for the attributes certificates carry; any other type prints as its dotted OID.
const SHORT_NAMES: Record<string, string> = {
  "2.5.4.3": "CN",
  "2.5.4.4": "SN",
  "2.5.4.5": "serialNumber",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.9": "street",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "2.5.4.12": "title",
  "2.5.4.13": "description",
  "2.5.4.15": "businessCategory",
  "2.5.4.16": "postalAddress",
  "2.5.4.17": "postalCode",
  "2.5.4.18": "postOfficeBox",
  "2.5.4.20": "telephoneNumber",
  "2.5.4.41": "name",
  "2.5.4.42": "GN",
  "2.5.4.43": "initials",
  "2.5.4.44": "generationQualifier",
  "2.5.4.45": "x500UniqueIdentifier",
  "2.5.4.46": "dnQualifier",
  "2.5.4.65": "pseudonym",
  "2.5.4.72": "role",
  "2.5.4.97": "organizationIdentifier",
  "0.9.2342.19200300.100.1.1": "UID",
  "0.9.2342.19200300.100.1.25": "DC",
  "1.2.840.113549.1.9.1": "emailAddress",
  "1.2.840.113549.1.9.2": "unstructuredName",
  "1.2.840.113549.1.9.8": "unstructuredAddress",
  "1.3.6.1.4.1.311.60.2.1.1": "jurisdictionL",
  "1.3.6.1.4.1.311.60.2.1.2": "jurisdictionST",
  "1.3.6.1.4.1.311.60.2.1.3": "jurisdictionC",
};

/**
 * RFC 4514 as `openssl x509 -nameopt RFC2253,-esc_msb` prints it: RDNs last to first joined
 * by `,`, the attributes of a multi-valued RDN (also last to first) by `+`, non-ASCII characters kept as UTF-8 (RFC 4514 §2.4 allows
 * it, and `F\C5\91tan\C3\BAs` helps no reader), values of unknown type as `#` + DER hex.
 */
function rfc4514(name: Name): string {
  // OpenSSL walks a name's attributes as one flat list, last to first, so the attributes of a
  // multi-valued RDN come out reversed too: follow it, so the strings compare equal.
  return [...name].reverse().map((rdn) => [...rdn].reverse().map(atv).join("+")).join(",");
}

function atv(a: AttributeTypeAndValue): string {
  const short = Object.hasOwn(SHORT_NAMES, a.type) ? SHORT_NAMES[a.type] : undefined;
  const v = a.value;
  // XN_FLAG_DUMP_UNKNOWN_FIELDS: a type OpenSSL cannot name is shown as DER, not as text
  const s = short === undefined ? null : v.bmpString ?? v.printableString ?? v.teletexString ??
    v.universalString ?? v.utf8String ?? v.ia5String ??
    (v.anyValue ? narrowString(v.anyValue) : null);
  return `${short ?? a.type}=${s === null ? "#" + hex(v.anyValue ?? valueDer(v)) : escape(s)}`;
}

// NumericString, VisibleString and the two time types: the other one-byte-per-character
// strings OpenSSL prints as text; any other type it dumps as hex.
function narrowString(der: ArrayBuffer): string | null {
  const b = new Uint8Array(der);
  if (![0x12, 0x1a, 0x17, 0x18].includes(b[0]) || b.length < 2) return null;
  let at = 2;
  if (b[1] & 0x80) at += b[1] & 0x7f;
  return latin1.decode(b.subarray(at));
}

// Strings decode to text and lose their DER; re-encoding gives it back byte for byte (DER
// has one encoding per value). A NULL value decodes to nothing at all.
function valueDer(v: AttributeTypeAndValue["value"]): ArrayBuffer {
  try {
    return AsnConvert.serialize(v);
  } catch {
    return new Uint8Array([0x05, 0x00]).buffer;
  }
}

const hex = (buf: ArrayBuffer) =>
  Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("").toUpperCase();

function escape(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    const code = c.charCodeAt(0);
    if (code < 0x20 || code === 0x7f) {
      out += "\\" + code.toString(16).padStart(2, "0").toUpperCase();
    } else if (
      ',+"\\<>;'.includes(c) || (i === 0 && (c === "#" || c === " ")) ||
      (i === s.length - 1 && c === " ")
    ) {
      out += "\\" + c;
    } else {
      out += c;
    }
  }
  return out;
}
