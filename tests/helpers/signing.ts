// Real signatures for the signature tests (issue 34), made offline:
// - cosign tag signatures written by cosign's published format (specs/SIGNATURE_SPEC.md in
//   sigstore/cosign: a simple-signing payload layer, its ECDSA-P256/SHA-256 DER signature in the
//   `dev.cosignproject.cosign/signature` annotation, keyless ones with the certificate and
//   Rekor bundle annotations);
// - sigstore bundles from sigstore's own @sigstore/sign, keyless through @sigstore/mock's Fulcio
//   and Rekor served on 127.0.0.1 (a test trusted_root.json names their keys);
// - notation JWS and COSE envelopes per the notation signature specification, over certificate
//   chains made here with @peculiar/x509.
import { fulcioHandler, initializeCA, initializeCTLog, initializeTLog } from "@sigstore/mock";
import * as x509 from "@peculiar/x509";
import { bundleToJSON } from "@sigstore/bundle";
import { DSSEBundleBuilder, FulcioSigner, RekorWitness, type Signer } from "@sigstore/sign";
import { encode as cborEncode, Tagged } from "cborg";
import { FlattenedSign } from "jose";
import { Buffer } from "node:buffer";
import { createHash, generateKeyPairSync, type KeyObject, sign as cryptoSign } from "node:crypto";
import type { SignatureArtifact, SignatureFormat } from "../../lib/signatures/mod.ts";

export const sha256 = (b: Uint8Array | string) =>
  "sha256:" + createHash("sha256").update(b).digest("hex");
const te = new TextEncoder();

/** An artifact held in memory: its manifest and blobs, as the registry would hand them over. */
export function memoryArtifact(
  format: SignatureFormat,
  manifest: unknown,
  blobs: Map<string, Uint8Array>,
): SignatureArtifact & { blobs: Map<string, Uint8Array> } {
  const bytes = te.encode(JSON.stringify(manifest));
  return {
    format,
    digest: sha256(bytes),
    manifest: bytes,
    blobs,
    readBlob(digest, maxBytes) {
      const b = blobs.get(digest);
      if (!b) return Promise.reject(new Error(`blob ${digest} unknown`));
      if (b.byteLength > maxBytes) return Promise.reject(new Error("blob too large"));
      return Promise.resolve(b);
    },
  };
}

export const ecKeys = () => generateKeyPairSync("ec", { namedCurve: "P-256" });
export const pemOf = (k: KeyObject) => k.export({ type: "spki", format: "pem" }).toString();

/** cosign's simple-signing payload for `digest`, byte for byte as cosign marshals it. */
export function simpleSigningPayload(
  digest: string,
  reference = "registry.example/app",
): Uint8Array {
  return te.encode(
    JSON.stringify({
      critical: {
        identity: { "docker-reference": reference },
        image: { "docker-manifest-digest": digest },
        type: "cosign container image signature",
      },
      optional: null,
    }),
  );
}

export interface CosignLayer {
  payload: Uint8Array;
  /** base64 */
  signature: string;
  annotations?: Record<string, string>;
}

/** A cosign `.sig` manifest holding the layers (cosign appends one layer per signature). */
export function cosignArtifact(layers: CosignLayer[]) {
  const blobs = new Map<string, Uint8Array>();
  const cfg = te.encode("{}");
  blobs.set(sha256(cfg), cfg);
  const manifest = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", size: 2, digest: sha256(cfg) },
    layers: layers.map((l) => {
      blobs.set(sha256(l.payload), l.payload);
      return {
        mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
        size: l.payload.byteLength,
        digest: sha256(l.payload),
        annotations: { "dev.cosignproject.cosign/signature": l.signature, ...l.annotations },
      };
    }),
  };
  return memoryArtifact("cosign-tag", manifest, blobs);
}

/** cosign's key-based signature: ECDSA (DER) over the payload bytes with SHA-256. */
export function cosignSign(payload: Uint8Array, key: KeyObject): string {
  return cryptoSign("sha256", payload, key).toString("base64");
}

/** An OCI 1.1 referrer manifest of `subject` with one layer (a bundle or an envelope). */
export function referrerArtifact(
  format: SignatureFormat,
  artifactType: string,
  layerMediaType: string,
  layer: Uint8Array,
  subject: string,
) {
  const blobs = new Map<string, Uint8Array>([[sha256(layer), layer]]);
  const empty = te.encode("{}");
  blobs.set(sha256(empty), empty);
  return memoryArtifact(format, {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    artifactType,
    config: { mediaType: "application/vnd.oci.empty.v1+json", size: 2, digest: sha256(empty) },
    layers: [{ mediaType: layerMediaType, size: layer.byteLength, digest: sha256(layer) }],
    subject: { mediaType: "application/vnd.oci.image.manifest.v1+json", size: 1, digest: subject },
  }, blobs);
}

export const BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json";

export function bundleArtifact(bundleJson: unknown, subject: string) {
  return referrerArtifact(
    "sigstore-bundle",
    BUNDLE_TYPE,
    BUNDLE_TYPE,
    te.encode(JSON.stringify(bundleJson)),
    subject,
  );
}

/** cosign v3's statement for a signed image: its digest the only subject. */
export function signStatement(subjectHex: string): Buffer {
  return Buffer.from(JSON.stringify({
    _type: "https://in-toto.io/Statement/v1",
    subject: [{ name: "", digest: { sha256: subjectHex } }],
    predicateType: "https://sigstore.dev/cosign/sign/v1",
    predicate: {},
  }));
}

/** A @sigstore/sign Signer holding a private key (key-based bundles). */
export function keySigner(key: KeyObject, publicPem: string): Signer {
  return {
    sign: (data: Buffer) =>
      Promise.resolve({
        signature: cryptoSign("sha256", data, key),
        key: { $case: "publicKey" as const, publicKey: publicPem, hint: "test" },
      }),
  };
}

/** A key-based DSSE bundle over cosign's sign statement for `subject`; logged when `rekorUrl`. */
export async function keyBundle(
  subject: string,
  key: KeyObject,
  publicPem: string,
  rekorUrl?: string,
) {
  const builder = new DSSEBundleBuilder({
    signer: keySigner(key, publicPem),
    witnesses: rekorUrl ? [new RekorWitness({ rekorBaseURL: rekorUrl })] : [],
  });
  const b = await builder.create({
    data: signStatement(subject.slice(7)),
    type: "application/vnd.in-toto+json",
  });
  return bundleToJSON(b);
}

export interface SigstoreWorld {
  /** base URL of the mock Fulcio and Rekor */
  url: string;
  /** the test trusted_root.json naming their keys */
  trustedRoot: Record<string, unknown>;
  /** a keyless DSSE bundle for `subject` signed as `sub` of `iss`; `clock` dates the certificate */
  keylessBundle(subject: string, sub: string, iss: string, clock?: Date): Promise<unknown>;
  /** keyless cosign `.sig` layer annotations (certificate, chain, Rekor bundle) for `subject` */
  keylessCosign(subject: string, sub: string, iss: string): Promise<CosignLayer>;
  close(): Promise<void>;
}

const b64url = (o: unknown) =>
  btoa(JSON.stringify(o)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");

/**
 * @sigstore/mock's Fulcio, CT log and Rekor behind one HTTP server on 127.0.0.1. Rekor's own
 * canonicalization of a DSSE entry (payload hash and signatures, not the proposed envelope) is
 * done here before the mock log signs it, as the real Rekor does.
 */
export async function sigstoreWorld(): Promise<SigstoreWorld> {
  const ctlog = await initializeCTLog(ecKeys());
  const caKeys = ecKeys();
  const cas = new Map<number, Awaited<ReturnType<typeof initializeCA>>>();
  const caAt = async (clock?: Date) => {
    const k = clock?.getTime() ?? 0;
    if (!cas.has(k)) cas.set(k, await initializeCA(caKeys, ctlog, clock));
    return cas.get(k)!;
  };
  const ca = await caAt();
  let clock: Date | undefined;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const body = await req.text();
    const path = new URL(req.url).pathname;
    if (path === "/api/v2/signingCert") {
      const r = await fulcioHandler(await caAt(clock)).fn(body);
      return new Response(r.response as BodyInit, { status: r.statusCode });
    }
    if (path === "/api/v1/log/entries") {
      const entry = await tlog.log(canonicalEntry(JSON.parse(body)));
      return Response.json(entry, { status: 201 });
    }
    return new Response("not found", { status: 404 });
  });
  const url = `http://127.0.0.1:${server.addr.port}`;
  const tlog = await initializeTLog(url, ecKeys());
  const start = new Date(Date.now() - 86_400_000 * 400).toISOString();
  const bytesOf = (v: ArrayBufferView) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  const spki = (k: ArrayBufferView) => Buffer.from(bytesOf(k)).toString("base64");
  const trustedRoot = {
    mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    tlogs: [{
      baseUrl: url,
      hashAlgorithm: "SHA2_256",
      publicKey: {
        rawBytes: spki(tlog.publicKey),
        keyDetails: "PKIX_ECDSA_P256_SHA_256",
        validFor: { start },
      },
      logId: { keyId: createHash("sha256").update(tlog.publicKey).digest("base64") },
    }],
    certificateAuthorities: [{
      subject: { organization: "sigstore.mock", commonName: "sigstore" },
      uri: url,
      certChain: { certificates: [{ rawBytes: spki(ca.rootCertificate) }] },
      validFor: { start },
    }],
    ctlogs: [{
      baseUrl: url,
      hashAlgorithm: "SHA2_256",
      publicKey: {
        rawBytes: spki(ctlog.publicKey),
        keyDetails: "PKIX_ECDSA_P256_SHA_256",
        validFor: { start },
      },
      logId: { keyId: spki(ctlog.logID) },
    }],
    timestampAuthorities: [],
  };
  const token = (sub: string, iss: string) =>
    `${b64url({ alg: "none" })}.${b64url({ sub, iss, aud: "sigstore" })}.`;
  const fulcio = (sub: string, iss: string) =>
    new FulcioSigner({
      identityProvider: { getToken: () => Promise.resolve(token(sub, iss)) },
      fulcioBaseURL: url,
    });
  return {
    url,
    trustedRoot,
    async keylessBundle(subject, sub, iss, at) {
      clock = at;
      try {
        const builder = new DSSEBundleBuilder({
          signer: fulcio(sub, iss),
          witnesses: [new RekorWitness({ rekorBaseURL: url })],
        });
        const b = await builder.create({
          data: signStatement(subject.slice(7)),
          type: "application/vnd.in-toto+json",
        });
        return bundleToJSON(b);
      } finally {
        clock = undefined;
      }
    },
    async keylessCosign(subject, sub, iss) {
      const payload = simpleSigningPayload(subject);
      const s = await fulcio(sub, iss).sign(Buffer.from(payload));
      if (s.key.$case !== "x509Certificate") throw new Error("no certificate from Fulcio");
      const signature = s.signature.toString("base64");
      const entry = await tlog.log(canonicalEntry({
        apiVersion: "0.0.1",
        kind: "hashedrekord",
        spec: {
          data: { hash: { algorithm: "sha256", value: sha256(payload).slice(7) } },
          signature: { content: signature, publicKey: { content: btoa(s.key.certificate) } },
        },
      })) as Record<string, Record<string, unknown>>;
      const e = Object.values(entry)[0];
      const rekor = {
        SignedEntryTimestamp: (e.verification as Record<string, string>).signedEntryTimestamp,
        Payload: {
          body: e.body,
          integratedTime: e.integratedTime,
          logIndex: e.logIndex,
          logID: e.logID,
        },
      };
      return {
        payload,
        signature,
        annotations: {
          "dev.sigstore.cosign/certificate": s.key.certificate,
          "dev.sigstore.cosign/chain": x509.PemConverter.encode(
            ca.rootCertificate.buffer as ArrayBuffer,
            "CERTIFICATE",
          ),
          "dev.sigstore.cosign/bundle": JSON.stringify(rekor),
        },
      };
    },
    close: () => server.shutdown(),
  };
}

/** The entry Rekor stores for a proposed one: a DSSE envelope becomes its hashes and signatures. */
function canonicalEntry(proposed: Record<string, unknown>): Record<string, unknown> {
  if (proposed.kind !== "dsse") return proposed;
  const spec = (proposed.spec as Record<string, Record<string, unknown>>).proposedContent;
  const envelope = JSON.parse(spec.envelope as string);
  const verifier = (spec.verifiers as string[])[0];
  const payload = Buffer.from(envelope.payload, "base64");
  return {
    apiVersion: "0.0.1",
    kind: "dsse",
    spec: {
      envelopeHash: { algorithm: "sha256", value: sha256(spec.envelope as string).slice(7) },
      payloadHash: { algorithm: "sha256", value: sha256(payload).slice(7) },
      signatures: envelope.signatures.map((s: { sig: string }) => ({
        signature: s.sig,
        verifier,
      })),
    },
  };
}

// ---- notation ----

x509.cryptoProvider.set(crypto);
const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface NotationChain {
  /** DER, leaf first */
  chain: Uint8Array[];
  rootPem: string;
  leafKey: CryptoKey;
  leafSubject: string;
}

/** A root CA and a code-signing leaf under it, valid from `notBefore` to `notAfter`. */
export async function notationChain(
  leafSubject = "C=US, ST=WA, L=Seattle, O=Acme, CN=release",
  notBefore = new Date(Date.now() - 86_400_000),
  notAfter = new Date(Date.now() + 86_400_000 * 365),
): Promise<NotationChain> {
  const rootKeys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "C=US, O=Acme, CN=Acme Test Root",
    notBefore: new Date(Date.now() - 86_400_000 * 30),
    notAfter: new Date(Date.now() + 86_400_000 * 3650),
    keys: rootKeys,
    signingAlgorithm: EC,
    extensions: [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ],
  });
  const leafKeys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: leafSubject,
    issuer: root.subject,
    notBefore,
    notAfter,
    publicKey: leafKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: EC,
    extensions: [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(["1.3.6.1.5.5.7.3.3"]),
    ],
  });
  return {
    chain: [new Uint8Array(leaf.rawData), new Uint8Array(root.rawData)],
    rootPem: root.toString("pem"),
    leafKey: leafKeys.privateKey,
    leafSubject,
  };
}

export const NOTATION_TYPE = "application/vnd.cncf.notary.signature";
const notationPayload = (subject: string) =>
  te.encode(JSON.stringify({
    targetArtifact: {
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest: subject,
      size: 528,
    },
  }));

/** A notation JWS envelope (ES256) over `subject` as a referrer artifact. */
export async function notationJws(
  subject: string,
  c: NotationChain,
  opts: { expiry?: Date; crit?: string } = {},
) {
  const header: Record<string, unknown> = {
    alg: "ES256",
    cty: "application/vnd.cncf.notary.payload.v1+json",
    crit: [
      "io.cncf.notary.signingScheme",
      ...opts.expiry ? ["io.cncf.notary.expiry"] : [],
      ...opts.crit ? [opts.crit] : [],
    ],
    "io.cncf.notary.signingScheme": "notary.x509",
    "io.cncf.notary.signingTime": new Date().toISOString(),
  };
  if (opts.expiry) header["io.cncf.notary.expiry"] = opts.expiry.toISOString();
  if (opts.crit) header[opts.crit] = "x";
  const jws = await new FlattenedSign(notationPayload(subject))
    .setProtectedHeader(header as never)
    .setUnprotectedHeader({ x5c: c.chain.map((d) => Buffer.from(d).toString("base64")) })
    .sign(c.leafKey, {
      crit: Object.fromEntries((header.crit as string[]).map((k) => [k, true])),
    });
  return referrerArtifact(
    "notation",
    NOTATION_TYPE,
    "application/jose+json",
    te.encode(JSON.stringify(jws)),
    subject,
  );
}

/** A notation COSE_Sign1 envelope (ES256) over `subject` as a referrer artifact. */
export async function notationCose(subject: string, c: NotationChain) {
  const prot = cborEncode(
    new Map<unknown, unknown>([
      [1, -7],
      [2, ["io.cncf.notary.signingScheme"]],
      [3, "application/vnd.cncf.notary.payload.v1+json"],
      ["io.cncf.notary.signingScheme", "notary.x509"],
      ["io.cncf.notary.signingTime", new Tagged(1, Math.floor(Date.now() / 1000))],
    ]),
  );
  const payload = notationPayload(subject);
  const tbs = cborEncode(["Signature1", prot, new Uint8Array(0), payload]);
  const sig = new Uint8Array(
    await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, c.leafKey, tbs),
  );
  const env = cborEncode(new Tagged(18, [prot, new Map([[33, c.chain]]), payload, sig]));
  return referrerArtifact("notation", NOTATION_TYPE, "application/cose", env, subject);
}
