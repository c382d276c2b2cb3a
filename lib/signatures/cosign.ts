// cosign's tag-based signatures (`sha256-<hex>.sig`), as cosign, skopeo and podman write them:
// each layer a simple-signing payload naming the image digest, its signature in the
// `dev.cosignproject.cosign/signature` annotation. Key-based: a trusted key made the signature.
// Keyless: the `dev.sigstore.cosign/certificate`, `/chain` and `/bundle` annotations go through
// the sigstore verification (lib/signatures/sigstore.ts).
import { Buffer } from "node:buffer";
import type { Descriptor } from "../oci/mod.ts";
import { artifactManifest, readLayer } from "./artifact.ts";
import { base64Bytes, boundedJson, isObject, type Json } from "./json.ts";
import { keySigner, trustedSigner } from "./keys.ts";
import { type Budget, LIMITS, Refused } from "./limits.ts";
import { cosignKeylessBundle, verifyEntity } from "./sigstore.ts";
import type { SignatureArtifact, SignerVerdict, VerifyConfig } from "./types.ts";

export const SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json";
export const SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature";
export const CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate";
export const CHAIN_ANNOTATION = "dev.sigstore.cosign/chain";
export const BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle";
const COSIGN_TYPE = "cosign container image signature";

/** One verdict per signature layer of a `.sig` manifest. */
export async function checkCosign(
  subject: string,
  art: SignatureArtifact,
  cfg: VerifyConfig,
  budget: Budget,
): Promise<SignerVerdict[]> {
  const m = artifactManifest(art, LIMITS.layersPerArtifact);
  const out: SignerVerdict[] = [];
  for (const layer of m.layers) {
    try {
      const signer = await checkLayer(subject, art, layer, cfg, budget);
      out.push({ format: "cosign-tag", artifact: art.digest, signer, valid: true });
    } catch (e) {
      if (!(e instanceof Refused)) throw e;
      out.push({
        format: "cosign-tag",
        artifact: art.digest,
        signer: e.signer,
        valid: false,
        reason: e.message,
      });
    }
  }
  return out;
}

async function checkLayer(
  subject: string,
  art: SignatureArtifact,
  layer: Descriptor,
  cfg: VerifyConfig,
  budget: Budget,
): Promise<string> {
  if (layer.mediaType !== SIMPLE_SIGNING) {
    throw new Refused(`layer ${layer.digest} is ${layer.mediaType}, not a simple-signing payload`);
  }
  const a = layer.annotations ?? {};
  const sigText = a[SIGNATURE_ANNOTATION];
  if (!sigText) throw new Refused(`layer ${layer.digest} has no ${SIGNATURE_ANNOTATION}`);
  for (
    const k of [SIGNATURE_ANNOTATION, CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION, BUNDLE_ANNOTATION]
  ) {
    if ((a[k]?.length ?? 0) > LIMITS.annotationBytes) {
      throw new Refused(`the ${k} annotation is larger than ${LIMITS.annotationBytes} bytes`);
    }
  }
  const signature = base64Bytes(sigText, "the signature annotation");
  const payload = await readLayer(art, layer, LIMITS.payloadBytes, "the simple-signing payload");
  const named = payloadDigest(payload);
  if (named !== subject) throw new Refused(`payload names ${named}, not the subject ${subject}`);
  const key = await trustedSigner(cfg.keys, payload, signature, budget);
  if (key) return keySigner(key);
  const cert = a[CERTIFICATE_ANNOTATION]?.trim();
  if (!cert) throw new Refused("signed by an untrusted key");
  const bundle = cosignKeylessBundle(
    payload,
    signature,
    cert,
    a[CHAIN_ANNOTATION],
    a[BUNDLE_ANNOTATION] || undefined,
  );
  return verifyEntity(bundle, Buffer.from(payload), cfg, budget);
}

/**
 * The image digest a simple-signing payload names (`critical.image.docker-manifest-digest`),
 * refusing any other payload type. Field names match case-insensitively as cosign's Go decoder
 * matches them; two spellings of one field are refused rather than picked between.
 */
export function payloadDigest(payload: Uint8Array): string {
  const doc = boundedJson(payload, LIMITS.payloadBytes, "the simple-signing payload");
  const critical = field(doc, "critical");
  const type = field(critical, "type");
  if (type !== COSIGN_TYPE) {
    throw new Refused(`the payload's critical.type is not "${COSIGN_TYPE}"`);
  }
  const digest = field(field(critical, "image"), "docker-manifest-digest");
  if (typeof digest !== "string" || !/^sha256:[a-f0-9]{64}$/.test(digest)) {
    throw new Refused("the payload names no sha256 image digest");
  }
  return digest;
}

function field(v: unknown, name: string): unknown {
  if (!isObject(v)) throw new Refused(`the payload has no ${name}`);
  const keys = Object.keys(v as Json).filter((k) => k.toLowerCase() === name);
  if (keys.length === 0) throw new Refused(`the payload has no ${name}`);
  if (keys.length > 1) throw new Refused(`the payload spells ${name} more than one way`);
  return (v as Json)[keys[0]];
}
