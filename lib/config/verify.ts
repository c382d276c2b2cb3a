// `[repository."<name>".verify]` (issue 34): which signatures a repository trusts. The types
// live here, below lib/signatures, so RepositoryConfig can carry them; the engine that applies
// them is lib/signatures. Keys, roots and patterns are parsed here so a malformed one stops
// startup (and a reload) naming its key.
import { createHash, createPublicKey, type KeyObject, X509Certificate } from "node:crypto";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { toTrustMaterial } from "@sigstore/verify";
import { type Fail, int, isTable, only, strings, type Table, table } from "./table_readers.ts";

export type VerifyMode = "off" | "warn" | "enforce";

/** A trusted public key, as the config names it. */
export interface TrustedKey {
  /** the key's name under `keys` */
  name: string;
  /** SPKI PEM, whether given inline or read from a file */
  pem: string;
  /** sha256 of the DER SubjectPublicKeyInfo, lowercase hex */
  fingerprint: string;
  algorithm: "ecdsa-p256" | "ecdsa-p384" | "ed25519" | "rsa";
}

/** A string matched exactly, or by a regex anchored at both ends. */
export type StringMatch = { exact: string } | { regex: string };

/** A keyless signer the sigstore trusted root may vouch for. */
export interface SigstoreIdentity {
  /** the certificate's subject alternative name (email, URI) */
  san: StringMatch;
  /** the OIDC issuer the certificate carries (Fulcio's 1.3.6.1.4.1.57264.1.1/.8 extension) */
  issuer: StringMatch;
}

/** `[repository."<name>".verify.sigstore]` */
export interface SigstoreTrust {
  /** where trusted_root.json was read from */
  trustedRootPath: string;
  /** the file's JSON (sigstore's TrustedRoot message: Fulcio CAs, Rekor and CT log keys) */
  trustedRoot: Record<string, unknown>;
  /** keyless signers accepted; empty = no keyless signature is accepted */
  identities: SigstoreIdentity[];
  /** transparency-log entries a bundle must carry and prove (default 1) */
  tlogThreshold: number;
  /** signed certificate timestamps a Fulcio certificate must carry (default 1) */
  ctlogThreshold: number;
}

/** `[repository."<name>".verify.notation]` */
export interface NotationTrust {
  /** the PEM files of x509 roots, as configured */
  trustStorePaths: string[];
  /** each root certificate, PEM */
  roots: string[];
  /** accepted leaf subject DNs ("C=US, O=Acme, CN=release"), or "*" for any */
  identities: string[];
}

export interface VerifyConfig {
  mode: VerifyMode;
  /** how many distinct valid signers are required (default 1) */
  threshold: number;
  /** which platforms of an index must be signed: "all" (default) or "any", or a list like ["linux/amd64"] */
  platforms: "all" | "any" | string[];
  /** seconds a held image waits for its signature; then `on_expiry` */
  holdSecs: number;
  onExpiry: "delete" | "keep";
  /** public keys whose signatures count (cosign tags, key-based sigstore bundles) */
  keys: TrustedKey[];
  /** keyless signatures and transparency logs; null = none accepted */
  sigstore: SigstoreTrust | null;
  /** notation signatures; null = none accepted */
  notation: NotationTrust | null;
}

export const VERIFY_DEFAULTS = {
  mode: "off" as VerifyMode,
  threshold: 1,
  platforms: "all" as const,
  holdSecs: 86_400,
  onExpiry: "keep" as const,
  tlogThreshold: 1,
  ctlogThreshold: 1,
};

/** trusted keys per repository: each is tried on a signature no other key made */
const MAX_KEYS = 64;
const KEY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const PLATFORM = /^[a-z0-9]+\/[a-z0-9_]+(\/[a-z0-9]+)?$/;
const DN_ATTR = /^[A-Za-z][A-Za-z0-9.-]*$/;

/** `[repository."<name>".verify]`, or null without the table. */
export function readVerify(v: unknown, path: string, fail: Fail): VerifyConfig | null {
  if (v === undefined) return null;
  if (!isTable(v)) fail(path, "must be a table");
  only(v, path, [
    "mode",
    "threshold",
    "platforms",
    "hold_secs",
    "on_expiry",
    "keys",
    "sigstore",
    "notation",
  ], fail);
  const mode = str(v, "mode", path, fail) ?? VERIFY_DEFAULTS.mode;
  if (!["off", "warn", "enforce"].includes(mode)) {
    fail(`${path}.mode`, "must be off, warn or enforce");
  }
  const onExpiry = str(v, "on_expiry", path, fail) ?? VERIFY_DEFAULTS.onExpiry;
  if (onExpiry !== "delete" && onExpiry !== "keep") {
    fail(`${path}.on_expiry`, "must be delete or keep");
  }
  const cfg: VerifyConfig = {
    mode: mode as VerifyMode,
    threshold: int(v, "threshold", path, 1, 16, fail) ?? VERIFY_DEFAULTS.threshold,
    platforms: readPlatforms(v, path, fail),
    holdSecs: int(v, "hold_secs", path, 0, 366 * 86_400, fail) ?? VERIFY_DEFAULTS.holdSecs,
    onExpiry,
    keys: readKeys(v.keys, `${path}.keys`, fail),
    sigstore: readSigstore(v.sigstore, `${path}.sigstore`, fail),
    notation: readNotation(v.notation, `${path}.notation`, fail),
  };
  if (
    cfg.mode !== "off" && cfg.keys.length === 0 && !cfg.sigstore?.identities.length &&
    !cfg.notation
  ) {
    fail(path, `mode = "${cfg.mode}" needs keys, sigstore identities or a notation trust store`);
  }
  return cfg;
}

function str(t: Table, k: string, path: string, fail: Fail): string | undefined {
  const v = t[k];
  if (v === undefined) return undefined;
  if (typeof v !== "string") fail(`${path}.${k}`, "must be a string");
  return v as string;
}

function readPlatforms(t: Table, path: string, fail: Fail): VerifyConfig["platforms"] {
  const v = t.platforms;
  if (v === undefined) return VERIFY_DEFAULTS.platforms;
  if (v === "all" || v === "any") return v;
  if (typeof v === "string") fail(`${path}.platforms`, `must be "all", "any" or a list`);
  const list = strings(t, "platforms", path, fail)!;
  if (list.length === 0) fail(`${path}.platforms`, "must name at least one platform");
  list.forEach((p, i) => {
    if (!PLATFORM.test(p)) fail(`${path}.platforms[${i}]`, `"${p}" is not os/arch[/variant]`);
  });
  return list;
}

/** A value starting with `-----BEGIN` is PEM itself; anything else is a file to read it from. */
function pemOf(v: unknown, key: string, fail: Fail): string {
  if (typeof v !== "string" || v === "") fail(key, "must be PEM text or the path of a PEM file");
  const s = v as string;
  if (s.trimStart().startsWith("-----BEGIN")) return s.trim();
  try {
    return readSmallFile(s).trim();
  } catch (e) {
    fail(key, `cannot read ${s}: ${(e as Error).message}`);
  }
}

/** Trust material files are small; anything else (a device, a huge file) is refused. */
const MAX_TRUST_FILE = 4 * 1024 * 1024;

function readSmallFile(path: string): string {
  const st = Deno.statSync(path);
  if (!st.isFile) throw new Error("not a regular file");
  if (st.size > MAX_TRUST_FILE) throw new Error(`larger than ${MAX_TRUST_FILE} bytes`);
  return Deno.readTextFileSync(path);
}

function readKeys(v: unknown, path: string, fail: Fail): TrustedKey[] {
  const t = table(v, path, fail);
  if (Object.keys(t).length > MAX_KEYS) fail(path, `at most ${MAX_KEYS} keys`);
  const seen = new Map<string, string>();
  return Object.entries(t).map(([name, value]) => {
    const key = `${path}.${name}`;
    if (!KEY_NAME.test(name)) {
      fail(key, "a key's name must be 1-64 letters, digits, '.', '_' or '-'");
    }
    const pem = pemOf(value, key, fail);
    let k: KeyObject;
    try {
      k = createPublicKey(pem);
    } catch (e) {
      fail(key, `not a PEM public key: ${(e as Error).message}`);
    }
    const algorithm = keyAlgorithm(k);
    if (!algorithm) {
      fail(key, "must be an ECDSA P-256/P-384, Ed25519 or RSA (2048 bits or more) public key");
    }
    const der = k.export({ type: "spki", format: "der" });
    const fingerprint = createHash("sha256").update(der).digest("hex");
    const other = seen.get(fingerprint);
    if (other) fail(key, `is the same key as ${other}`);
    seen.set(fingerprint, key);
    return {
      name,
      pem: k.export({ type: "spki", format: "pem" }).toString().trim(),
      fingerprint,
      algorithm,
    };
  });
}

function keyAlgorithm(k: KeyObject): TrustedKey["algorithm"] | null {
  const d = k.asymmetricKeyDetails ?? {};
  if (k.asymmetricKeyType === "ec") {
    if (d.namedCurve === "prime256v1") return "ecdsa-p256";
    if (d.namedCurve === "secp384r1") return "ecdsa-p384";
    return null;
  }
  if (k.asymmetricKeyType === "ed25519") return "ed25519";
  if (k.asymmetricKeyType === "rsa" && (d.modulusLength ?? 0) >= 2048) return "rsa";
  return null;
}

/** `san` / `san_regex` (or `issuer` / `issuer_regex`): exactly one of them. */
function readMatch(t: Table, name: string, path: string, fail: Fail): StringMatch {
  const exact = str(t, name, path, fail);
  const regex = str(t, `${name}_regex`, path, fail);
  if ((exact === undefined) === (regex === undefined)) {
    fail(`${path}.${name}`, `set one of ${name} and ${name}_regex`);
  }
  if (exact !== undefined) {
    if (exact === "") fail(`${path}.${name}`, "must not be empty");
    return { exact };
  }
  try {
    new RegExp(`^(?:${regex})$`);
  } catch (e) {
    fail(`${path}.${name}_regex`, `invalid regex: ${(e as Error).message}`);
  }
  return { regex: regex! };
}

function readSigstore(v: unknown, path: string, fail: Fail): SigstoreTrust | null {
  if (v === undefined) return null;
  if (!isTable(v)) fail(path, "must be a table");
  only(v, path, ["trusted_root", "identities", "tlog_threshold", "ctlog_threshold"], fail);
  const rootPath = str(v, "trusted_root", path, fail);
  if (!rootPath) fail(`${path}.trusted_root`, "is required: the path of a trusted_root.json");
  const trustedRoot = readTrustedRoot(rootPath!, `${path}.trusted_root`, fail);
  const ids = v.identities === undefined ? [] : v.identities;
  if (!Array.isArray(ids)) fail(`${path}.identities`, "must be an array of tables");
  const identities = (ids as unknown[]).map((item, i) => {
    const p = `${path}.identities[${i}]`;
    if (!isTable(item)) fail(p, "must be a table");
    only(item, p, ["san", "san_regex", "issuer", "issuer_regex"], fail);
    return { san: readMatch(item, "san", p, fail), issuer: readMatch(item, "issuer", p, fail) };
  });
  return {
    trustedRootPath: rootPath!,
    trustedRoot,
    identities,
    tlogThreshold: int(v, "tlog_threshold", path, 0, 8, fail) ?? VERIFY_DEFAULTS.tlogThreshold,
    ctlogThreshold: int(v, "ctlog_threshold", path, 0, 8, fail) ??
      VERIFY_DEFAULTS.ctlogThreshold,
  };
}

function readTrustedRoot(file: string, key: string, fail: Fail): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(readSmallFile(file));
  } catch (e) {
    fail(key, `cannot read ${file} as JSON: ${(e as Error).message}`);
  }
  const problem = trustedRootProblem(json);
  if (problem) fail(key, `${file} is not a usable sigstore trusted root: ${problem}`);
  return json as Record<string, unknown>;
}

function readNotation(v: unknown, path: string, fail: Fail): NotationTrust | null {
  if (v === undefined) return null;
  if (!isTable(v)) fail(path, "must be a table");
  only(v, path, ["trust_store", "identities"], fail);
  const raw = typeof v.trust_store === "string" ? [v.trust_store] : v.trust_store;
  if (!Array.isArray(raw) || raw.length === 0) {
    fail(`${path}.trust_store`, "is required: PEM files (or PEM text) of x509 root certificates");
  }
  const roots: string[] = [];
  const paths = (raw as unknown[]).map((item, i) => {
    const key = `${path}.trust_store[${i}]`;
    const pem = pemOf(item, key, fail);
    const certs = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
    if (!certs) fail(key, "holds no PEM certificate");
    for (const c of certs!) {
      let x: X509Certificate;
      try {
        x = new X509Certificate(c);
      } catch (e) {
        fail(key, `not an x509 certificate: ${(e as Error).message}`);
      }
      if (!x!.ca && !selfSigned(x!)) {
        fail(
          key,
          `${x!.subject.replace(/\n/g, ", ")} is neither a CA nor a self-signed certificate`,
        );
      }
      roots.push(x!.toString().trim());
    }
    return item as string;
  });
  const identities = strings(v, "identities", path, fail) ?? [];
  if (identities.length === 0) {
    fail(`${path}.identities`, 'is required: leaf subject DNs ("C=US, O=Acme, CN=release") or "*"');
  }
  return {
    trustStorePaths: paths,
    roots,
    identities: identities.map((dn, i) => {
      const d = dn.replace(/^x509\.subject:\s*/, "").trim();
      if (d === "*") return d;
      if (parseDn(d) === null) {
        fail(
          `${path}.identities[${i}]`,
          `"${dn}" is not a distinguished name like "C=US, O=Acme, CN=x"`,
        );
      }
      return d;
    }),
  };
}

function selfSigned(x: X509Certificate): boolean {
  try {
    // names, not checkIssued: Deno's refuses a self-signed certificate
    return x.issuer === x.subject && x.verify(x.publicKey);
  } catch {
    return false;
  }
}

/**
 * A distinguished name "C=US, O=Acme, CN=x" as attribute → value (attributes upper-cased), or
 * null when it is not one. Values may escape ',' and '=' with a backslash (RFC 4514).
 */
export function parseDn(dn: string): Map<string, string> | null {
  const out = new Map<string, string>();
  const parts = dn.split(/(?<!\\),/);
  for (const part of parts) {
    const eq = part.search(/(?<!\\)=/);
    if (eq < 0) return null;
    const attr = part.slice(0, eq).trim().toUpperCase();
    const value = part.slice(eq + 1).trim().replace(/\\(.)/g, "$1");
    if (!DN_ATTR.test(attr) || value === "" || out.has(attr)) return null;
    out.set(attr, value);
  }
  return out.size > 0 ? out : null;
}

/** Why `json` cannot be a sigstore TrustedRoot, or null: it must build @sigstore/verify's trust material. */
function trustedRootProblem(json: unknown): string | null {
  if (!isTable(json)) return "not a JSON object";
  try {
    const m = toTrustMaterial(TrustedRoot.fromJSON(json));
    if (m.certificateAuthorities.length === 0 && m.tlogs.length === 0) {
      return "it names no certificate authority and no transparency log";
    }
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}
