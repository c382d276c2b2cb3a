// cosign's tag-based signatures, written in the tests by cosign's published format (issue 34):
// a simple-signing payload naming the image's digest, an ECDSA P-256 SHA-256 signature of the
// payload bytes (ASN.1 DER, as Go's ecdsa.SignASN1 writes it) base64 in the layer annotation
// `dev.cosignproject.cosign/signature`, the payload as the layer, and the manifest tagged
// `sha256-<hex>.sig`. Keys are made with crypto.subtle.
import assert from "node:assert/strict";
import { req } from "./api.ts";
import type { TestServer } from "./server.ts";
import { descOf, imageManifest, jsonBytes, OCI_CONFIG, OCI_MANIFEST } from "./oci_content.ts";
import { sha256 } from "./bytes.ts";

export const SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json";
export const SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature";

export interface SigningKey {
  privateKey: CryptoKey;
  /** SPKI PEM of the public key, as [verify].keys takes it */
  pem: string;
}

export async function makeKey(): Promise<SigningKey> {
  const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ]);
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", pair.publicKey));
  const b64 = btoa(String.fromCharCode(...spki)).replace(/(.{64})/g, "$1\n");
  return {
    privateKey: pair.privateKey,
    pem: `-----BEGIN PUBLIC KEY-----\n${b64.trim()}\n-----END PUBLIC KEY-----`,
  };
}

/** The TOML string of a PEM (multi-line basic string). */
export function tomlPem(pem: string): string {
  return `"""\n${pem}\n"""`;
}

/** `[repository."<name>".verify]` with the given keys (name → PEM). */
export function verifyToml(
  repository: string,
  mode: "off" | "warn" | "enforce",
  keys: Record<string, SigningKey>,
  extra = "",
): string {
  const lines = Object.entries(keys).map(([n, k]) => `${n} = ${tomlPem(k.pem)}`);
  return `[repository."${repository}".verify]
mode = "${mode}"
${extra}
[repository."${repository}".verify.keys]
${lines.join("\n")}
`;
}

/** r||s (P1363, what WebCrypto gives) as ASN.1 DER SEQUENCE { INTEGER r, INTEGER s }. */
function derSignature(p1363: Uint8Array): Uint8Array {
  const int = (b: Uint8Array) => {
    let i = 0;
    while (i < b.length - 1 && b[i] === 0) i++;
    let v = b.slice(i);
    if (v[0] & 0x80) v = new Uint8Array([0, ...v]);
    return new Uint8Array([0x02, v.length, ...v]);
  };
  const r = int(p1363.slice(0, 32));
  const s = int(p1363.slice(32));
  return new Uint8Array([0x30, r.length + s.length, ...r, ...s]);
}

export function simpleSigningPayload(dockerReference: string, digest: string): Uint8Array {
  return jsonBytes({
    critical: {
      identity: { "docker-reference": dockerReference },
      image: { "docker-manifest-digest": digest },
      type: "cosign container image signature",
    },
    optional: null,
  });
}

export async function signPayload(key: SigningKey, payload: Uint8Array): Promise<string> {
  const sig = new Uint8Array(
    await crypto.subtle.sign(
      { name: "ECDSA", hash: "SHA-256" },
      key.privateKey,
      payload as BufferSource,
    ),
  );
  return btoa(String.fromCharCode(...derSignature(sig)));
}

export interface CosignSignature {
  tag: string;
  manifest: Uint8Array;
  digest: string;
  blobs: { digest: string; bytes: Uint8Array }[];
}

/**
 * A cosign signature manifest of `digest` by `key`. `payloadDigest` (default `digest`): the
 * digest the payload names, to forge a signature of another image.
 */
export async function cosignSignature(
  key: SigningKey,
  reference: string,
  digest: string,
  opts: { payloadDigest?: string; tamper?: boolean } = {},
): Promise<CosignSignature> {
  let payload = simpleSigningPayload(reference, opts.payloadDigest ?? digest);
  const signature = await signPayload(key, payload);
  if (opts.tamper) {
    // Signed, then changed: the signature no longer covers the bytes.
    payload = simpleSigningPayload(reference + "-x", digest);
  }
  const config = jsonBytes({ architecture: "", os: "", config: {}, rootfs: { type: "layers" } });
  const layer = { ...(await descOf(SIMPLE_SIGNING, payload)) };
  const manifest = imageManifest(await descOf(OCI_CONFIG, config), [
    { ...layer, annotations: { [SIGNATURE_ANNOTATION]: signature } } as typeof layer,
  ]);
  return {
    tag: `sha256-${digest.slice("sha256:".length)}.sig`,
    manifest,
    digest: await sha256(manifest),
    blobs: [
      { digest: await sha256(payload), bytes: payload },
      { digest: await sha256(config), bytes: config },
    ],
  };
}

/** Pushes a signature's blobs, then its manifest under its `.sig` tag. */
export async function pushSignature(
  s: TestServer,
  ns: string,
  sig: CosignSignature,
  headers: Record<string, string> = {},
): Promise<Response> {
  for (const b of sig.blobs) {
    const r = await req(s, `/v2/${ns}/blobs/uploads/?digest=${b.digest}`, {
      method: "POST",
      body: b.bytes as BodyInit,
      headers,
    });
    await r.body?.cancel();
    assert.equal(r.status, 201, `blob ${b.digest} of the signature: ${r.status}`);
  }
  return await req(s, `/v2/${ns}/manifests/${sig.tag}`, {
    method: "PUT",
    body: sig.manifest as BodyInit,
    headers: { "content-type": OCI_MANIFEST, ...headers },
  });
}
