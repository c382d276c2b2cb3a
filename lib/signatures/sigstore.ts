// Sigstore verification through the sigstore project's own libraries (@sigstore/bundle parses,
// @sigstore/verify checks certificates, transparency-log entries, timestamps and signatures):
// bundles pushed as OCI 1.1 referrers, and the keyless cosign tag signatures, whose certificate
// and Rekor bundle annotations are put into a bundle of the same shape first.
import "./node_compat.ts";
import "./cert_memo.ts";
import { Buffer } from "node:buffer";
import { createHash, type KeyObject } from "node:crypto";
import { type Bundle, bundleFromJSON, type TransparencyLogEntry } from "@sigstore/bundle";
import { HashAlgorithm, TrustedRoot } from "@sigstore/protobuf-specs";
import {
  type SignedEntity,
  type Signer,
  toSignedEntity,
  toTrustMaterial,
  type TrustMaterial,
  Verifier,
} from "@sigstore/verify";
import { type Descriptor } from "../oci/mod.ts";
import { artifactManifest, readLayer, sha256Hex } from "./artifact.ts";
import { matches } from "./identity.ts";
import { base64Bytes, boundedJson, isObject } from "./json.ts";
import { keyObject, keySigner } from "./keys.ts";
import { type Budget, LIMITS, Refused } from "./limits.ts";
import type { SignatureArtifact, SigstoreTrust, TrustedKey, VerifyConfig } from "./types.ts";

export const BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json";
const IN_TOTO = "application/vnd.in-toto+json";

const materials = new WeakMap<SigstoreTrust, TrustMaterial>();
const NO_ROOT = toTrustMaterial(
  TrustedRoot.fromJSON({ tlogs: [], certificateAuthorities: [], ctlogs: [] }),
);

/** The trust material of a configured root, built once per config. */
function rootMaterial(s: SigstoreTrust | null): TrustMaterial {
  if (!s) return NO_ROOT;
  let m = materials.get(s);
  if (!m) {
    m = toTrustMaterial(TrustedRoot.fromJSON(s.trustedRoot));
    materials.set(s, m);
  }
  return m;
}

/** A sigstore bundle referrer: `sigstore:<SAN> (<issuer>)` or `key:<name>` when it verifies. */
export async function checkBundle(
  subject: string,
  art: SignatureArtifact,
  cfg: VerifyConfig,
  budget: Budget,
  subjectManifest?: Uint8Array,
): Promise<string> {
  const m = artifactManifest(art, 1);
  const layer: Descriptor = m.layers[0];
  if (layer.mediaType.split(";")[0] !== BUNDLE_MEDIA_TYPE) {
    throw new Refused(`the referrer's layer is ${layer.mediaType}, not a sigstore bundle`);
  }
  const raw = await readLayer(art, layer, LIMITS.envelopeBytes, "the sigstore bundle");
  const json = boundedJson(raw, LIMITS.envelopeBytes, "the sigstore bundle");
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON(json);
  } catch (e) {
    throw new Refused(`the sigstore bundle is malformed: ${(e as Error).message}`);
  }
  if (bundle.verificationMaterial.tlogEntries.length > LIMITS.tlogEntries) {
    throw new Refused(`the sigstore bundle has more than ${LIMITS.tlogEntries} log entries`);
  }
  const artifact = bindsSubject(bundle, subject, subjectManifest);
  return verifyEntity(bundle, artifact, cfg, budget);
}

/**
 * Checks that the bundle's content names the subject, and returns the artifact bytes a message
 * signature needs (the subject's manifest), or undefined for DSSE.
 */
function bindsSubject(
  bundle: Bundle,
  subject: string,
  subjectManifest?: Uint8Array,
): Buffer | undefined {
  const hex = sha256Hex(subject)!;
  if (bundle.content.$case === "dsseEnvelope") {
    const env = bundle.content.dsseEnvelope;
    if (env.payloadType !== IN_TOTO) {
      throw new Refused(`the bundle's envelope holds ${env.payloadType}, not an in-toto statement`);
    }
    const stmt = boundedJson(env.payload, LIMITS.envelopeBytes, "the in-toto statement");
    const subjects = isObject(stmt) && Array.isArray(stmt.subject) ? stmt.subject : null;
    if (!subjects) throw new Refused("the in-toto statement has no subjects");
    if (subjects.length > LIMITS.statementSubjects) {
      throw new Refused(
        `the in-toto statement names more than ${LIMITS.statementSubjects} subjects`,
      );
    }
    const named = subjects.some((s) =>
      isObject(s) && isObject(s.digest) && s.digest.sha256 === hex
    );
    if (!named) {
      const first = subjects.find((s) => isObject(s) && isObject(s.digest));
      const other = first
        ? `sha256:${(first as { digest: { sha256?: string } }).digest.sha256}`
        : "";
      throw new Refused(
        `the statement names ${other || "another artifact"}, not the subject ${subject}`,
      );
    }
    return undefined;
  }
  const md = bundle.content.messageSignature.messageDigest;
  if (!md || md.algorithm !== HashAlgorithm.SHA2_256) {
    throw new Refused("the message signature's digest is not sha256");
  }
  const named = Buffer.from(md.digest).toString("hex");
  if (named !== hex) {
    throw new Refused(`the message signature names sha256:${named}, not the subject ${subject}`);
  }
  if (!subjectManifest) {
    throw new Refused("a message-signature bundle needs the subject's manifest bytes to check");
  }
  if (createHash("sha256").update(subjectManifest).digest("hex") !== hex) {
    throw new Refused("the subject's manifest bytes do not match the subject digest");
  }
  return Buffer.from(subjectManifest);
}

/**
 * Verifies a bundle (a real one, or one made of cosign annotations) over `artifact`; returns
 * the signer. A public-key bundle counts when a trusted key made it (its log entries are checked
 * only when a sigstore root is configured); a certificate bundle needs the root, and its
 * identity must be accepted.
 */
export function verifyEntity(
  bundle: Bundle,
  artifact: Buffer | undefined,
  cfg: VerifyConfig,
  budget: Budget,
): string {
  let entity: SignedEntity;
  try {
    entity = toSignedEntity(bundle, artifact);
  } catch (e) {
    throw new Refused(`the bundle cannot be read: ${(e as Error).message}`);
  }
  const root = cfg.sigstore;
  if (entity.key.$case === "public-key") {
    const key = findKey(cfg.keys, entity, budget);
    if (!key) throw new Refused("signed by an untrusted key");
    const material: TrustMaterial = {
      ...rootMaterial(root),
      publicKey: () => ({ publicKey: keyObject(key), validFor: () => true }),
    };
    if (!root) entity = { ...entity, tlogEntries: [], timestamps: [] };
    budget.spend(1 + entity.tlogEntries.length);
    run(material, entity, {
      tlogThreshold: root ? root.tlogThreshold : 0,
      ctlogThreshold: 0,
      timestampThreshold: 0,
    });
    return keySigner(key);
  }
  if (!root) {
    throw new Refused("a keyless (certificate) signature, but no sigstore root is trusted");
  }
  budget.spend(4 + entity.tlogEntries.length);
  let signer: Signer;
  try {
    signer = run(rootMaterial(root), entity, {
      tlogThreshold: root.tlogThreshold,
      ctlogThreshold: root.ctlogThreshold,
      timestampThreshold: 1,
    });
  } catch (e) {
    throw expiredCertificate(entity) ?? e;
  }
  const san = signer.identity?.subjectAlternativeName;
  const issuer = signer.identity?.extensions?.issuer;
  const who = `sigstore:${san ?? "?"} (${issuer ?? "no issuer"})`;
  if (!root.identities.some((id) => matches(id.san, san) && matches(id.issuer, issuer))) {
    throw new Refused(`signed by ${who.slice(9)}, which no configured identity accepts`, who);
  }
  return who;
}

/**
 * When the certificate was not valid at a time the entity's log entries vouch for, that, in
 * words (@sigstore/verify says only that the chain failed).
 */
function expiredCertificate(entity: SignedEntity): Refused | null {
  if (entity.key.$case !== "certificate") return null;
  const cert = entity.key.certificate;
  for (const t of entity.timestamps) {
    if (t.$case !== "transparency-log") continue;
    const at = new Date(Number(t.tlogEntry.integratedTime) * 1000);
    if (!cert.validForDate(at)) {
      return new Refused(
        `certificate expired or not valid at signing time: valid ${cert.notBefore.toISOString()} to ${cert.notAfter.toISOString()}, logged ${at.toISOString()}`,
      );
    }
  }
  return null;
}

function findKey(keys: TrustedKey[], entity: SignedEntity, budget: Budget): TrustedKey | null {
  for (const k of keys) {
    budget.spend();
    try {
      if (entity.signature.verifySignature(keyObject(k) as KeyObject)) return k;
    } catch { /* not this key's kind of signature */ }
  }
  return null;
}

function run(
  material: TrustMaterial,
  entity: SignedEntity,
  options: ConstructorParameters<typeof Verifier>[1],
): Signer {
  try {
    return new Verifier(material, options).verify(entity);
  } catch (e) {
    throw new Refused(reasonOf(e));
  }
}

/** @sigstore/verify's errors in the words a verdict uses. */
function reasonOf(e: unknown): string {
  const code = (e as { code?: string }).code ?? "";
  const msg = (e as Error).message ?? String(e);
  if (code.startsWith("TLOG")) return `log entry does not verify: ${msg}`;
  if (code === "CERTIFICATE_ERROR") {
    return /valid|expired/i.test(msg)
      ? `certificate expired or not valid at signing time: ${msg}`
      : `certificate does not verify: ${msg}`;
  }
  if (code === "SIGNATURE_ERROR") return "signature does not verify";
  if (code === "TIMESTAMP_ERROR") return `no verified timestamp: ${msg}`;
  if (code === "PUBLIC_KEY_ERROR") return `public key not accepted: ${msg}`;
  return `does not verify: ${msg}`;
}

/**
 * cosign's keyless annotations (certificate, chain, Rekor bundle) over a simple-signing payload
 * as a sigstore bundle (v0.1 shape: message signature, certificate chain, inclusion promise).
 */
export function cosignKeylessBundle(
  payload: Uint8Array,
  signature: Uint8Array,
  certificatePem: string,
  chainPem: string | undefined,
  rekorBundle: string | undefined,
): Bundle {
  const certs = [certificatePem, chainPem ?? ""].join("\n").match(
    /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g,
  ) ?? [];
  if (certs.length === 0) throw new Refused("the certificate annotation holds no certificate");
  if (certs.length > LIMITS.certificates) {
    throw new Refused(`the certificate chain has more than ${LIMITS.certificates} certificates`);
  }
  const der = certs.map((pem) =>
    Buffer.from(base64Bytes(pem.replace(/-----[A-Z ]+-----|\s+/g, ""), "a certificate"))
  );
  const tlogEntries: TransparencyLogEntry[] = rekorBundle ? [rekorEntry(rekorBundle)] : [];
  return {
    mediaType: "application/vnd.dev.sigstore.bundle+json;version=0.1",
    verificationMaterial: {
      content: {
        $case: "x509CertificateChain",
        x509CertificateChain: { certificates: der.map((rawBytes) => ({ rawBytes })) },
      },
      tlogEntries,
      timestampVerificationData: undefined,
    },
    content: {
      $case: "messageSignature",
      messageSignature: {
        messageDigest: {
          algorithm: HashAlgorithm.SHA2_256,
          digest: createHash("sha256").update(payload).digest(),
        },
        signature: Buffer.from(signature),
      },
    },
  } as Bundle;
}

/** cosign's `dev.sigstore.cosign/bundle` annotation (a Rekor entry and its SET) as a log entry. */
function rekorEntry(annotation: string): TransparencyLogEntry {
  const j = boundedJson(
    new TextEncoder().encode(annotation),
    LIMITS.annotationBytes,
    "the Rekor bundle annotation",
  );
  const p = isObject(j) && isObject(j.Payload) ? j.Payload : null;
  if (
    !p || typeof p.body !== "string" || !Number.isSafeInteger(p.integratedTime) ||
    !Number.isSafeInteger(p.logIndex) || typeof p.logID !== "string" ||
    !/^[0-9a-f]{64}$/.test(p.logID)
  ) {
    throw new Refused("the Rekor bundle annotation is malformed");
  }
  const body = Buffer.from(base64Bytes(p.body, "the Rekor entry body"));
  const parsed = boundedJson(body, LIMITS.annotationBytes, "the Rekor entry body");
  if (
    !isObject(parsed) || typeof parsed.kind !== "string" || typeof parsed.apiVersion !== "string"
  ) {
    throw new Refused("the Rekor entry body names no kind");
  }
  return {
    logIndex: String(p.logIndex),
    logId: { keyId: Buffer.from(p.logID, "hex") },
    kindVersion: { kind: parsed.kind, version: parsed.apiVersion },
    integratedTime: String(p.integratedTime),
    inclusionPromise: {
      signedEntryTimestamp: Buffer.from(
        base64Bytes(j && (j as { SignedEntryTimestamp?: unknown }).SignedEntryTimestamp, "the SET"),
      ),
    },
    inclusionProof: undefined,
    canonicalizedBody: body,
  } as TransparencyLogEntry;
}
