// Notation signatures (`application/vnd.cncf.notary.signature` referrers): a JWS (jose checks
// it) or COSE_Sign1 (cborg decodes it, node:crypto checks it) envelope whose payload's
// targetArtifact is the subject, signed by the leaf of an x5c chain ending at a trust-store root,
// whose subject DN is an accepted identity. Critical headers other than notary's are refused,
// and an envelope past its io.cncf.notary.expiry no longer counts.
import {
  constants,
  type KeyObject,
  verify as cryptoVerify,
  type X509Certificate,
} from "node:crypto";
import { decode as cborDecode, encode as cborEncode, Tagged } from "cborg";
import { flattenedVerify } from "jose";
import { artifactManifest, readLayer } from "./artifact.ts";
import { base64Bytes, boundedJson, isObject } from "./json.ts";
import { type Budget, LIMITS, Refused } from "./limits.ts";
import type { SignatureArtifact, VerifyConfig } from "./types.ts";
import { identityAccepted, parseChain, subjectDn, verifyChain } from "./x509.ts";

export const NOTATION_ARTIFACT = "application/vnd.cncf.notary.signature";
export const JWS_MEDIA_TYPE = "application/jose+json";
export const COSE_MEDIA_TYPE = "application/cose";
const PAYLOAD_TYPE = "application/vnd.cncf.notary.payload.v1+json";
const SCHEME = "io.cncf.notary.signingScheme";
const EXPIRY = "io.cncf.notary.expiry";
const AUTHENTIC_TIME = "io.cncf.notary.authenticSigningTime";
const KNOWN_CRITICAL = [SCHEME, EXPIRY, AUTHENTIC_TIME];
const SCHEMES = ["notary.x509", "notary.x509.signingAuthority"];

/** What both envelope kinds yield once their signature checks out. */
interface Envelope {
  payload: Uint8Array;
  contentType: unknown;
  scheme: unknown;
  /** seconds since the epoch, or undefined */
  expiry?: number;
}

/** A notation referrer: `notation:<subject DN>` when it verifies. */
export async function checkNotation(
  subject: string,
  art: SignatureArtifact,
  cfg: VerifyConfig,
  budget: Budget,
  now: Date,
): Promise<string> {
  const m = artifactManifest(art, 1);
  const layer = m.layers[0];
  const kind = layer.mediaType.split(";")[0];
  if (kind !== JWS_MEDIA_TYPE && kind !== COSE_MEDIA_TYPE) {
    throw new Refused(`the notation envelope is ${layer.mediaType}, neither JWS nor COSE`);
  }
  const trust = cfg.notation;
  const bytes = await readLayer(art, layer, LIMITS.envelopeBytes, "the notation envelope");
  if (!trust) throw new Refused("a notation signature, but no notation trust store is configured");
  budget.spend(LIMITS.certificates + 1);
  const { chain, open } = kind === JWS_MEDIA_TYPE ? readJws(bytes) : readCose(bytes);
  const leaf = verifyChain(chain, trust.roots, now);
  const who = `notation:${subjectDn(leaf)}`;
  let env: Envelope;
  try {
    env = await open(leaf.publicKey);
  } catch (e) {
    if (e instanceof Refused) throw new Refused(e.message, who);
    throw new Refused(`the envelope's signature does not verify: ${(e as Error).message}`, who);
  }
  if (env.contentType !== PAYLOAD_TYPE) {
    throw new Refused(`the envelope's content type is not ${PAYLOAD_TYPE}`, who);
  }
  if (typeof env.scheme !== "string" || !SCHEMES.includes(env.scheme)) {
    throw new Refused(`unknown signing scheme ${String(env.scheme)}`, who);
  }
  if (env.expiry !== undefined && env.expiry * 1000 < now.getTime()) {
    throw new Refused(
      `the signature expired at ${new Date(env.expiry * 1000).toISOString()}`,
      who,
    );
  }
  const payload = boundedJson(env.payload, LIMITS.envelopeBytes, "the notation payload");
  const target = isObject(payload) && isObject(payload.targetArtifact)
    ? payload.targetArtifact.digest
    : undefined;
  if (typeof target !== "string") throw new Refused("the payload names no targetArtifact", who);
  if (target !== subject) {
    throw new Refused(`payload names ${target}, not the subject ${subject}`, who);
  }
  if (!identityAccepted(leaf, trust.identities)) {
    throw new Refused(`signed by ${subjectDn(leaf)}, which no configured identity accepts`, who);
  }
  return who;
}

interface Opened {
  chain: X509Certificate[];
  /** checks the signature with the leaf's key and returns the envelope's content */
  open(key: KeyObject): Promise<Envelope>;
}

const JWS_ALGORITHMS = ["PS256", "PS384", "PS512", "ES256", "ES384", "ES512"];

function readJws(bytes: Uint8Array): Opened {
  const jws = boundedJson(bytes, LIMITS.envelopeBytes, "the JWS envelope");
  if (
    !isObject(jws) || typeof jws.payload !== "string" || typeof jws.protected !== "string" ||
    typeof jws.signature !== "string" || !isObject(jws.header)
  ) {
    throw new Refused("the JWS envelope is not a flattened JWS with an unprotected header");
  }
  const x5c = jws.header.x5c;
  if (!Array.isArray(x5c)) throw new Refused("the JWS header carries no x5c chain");
  if (x5c.length > LIMITS.certificates) {
    throw new Refused(`the certificate chain has more than ${LIMITS.certificates} certificates`);
  }
  const chain = parseChain(x5c.map((c) => base64Bytes(c, "an x5c certificate")));
  return {
    chain,
    async open(key) {
      const r = await flattenedVerify(
        {
          payload: jws.payload as string,
          protected: jws.protected as string,
          signature: jws.signature as string,
        },
        key,
        {
          algorithms: JWS_ALGORITHMS,
          crit: Object.fromEntries(KNOWN_CRITICAL.map((k) => [k, true])),
        },
      );
      const h = r.protectedHeader as Record<string, unknown>;
      const expiry = h[EXPIRY];
      if (expiry !== undefined && (typeof expiry !== "string" || isNaN(Date.parse(expiry)))) {
        throw new Refused("the envelope's expiry is not a time");
      }
      return {
        payload: r.payload,
        contentType: h.cty,
        scheme: h[SCHEME],
        expiry: expiry === undefined ? undefined : Date.parse(expiry as string) / 1000,
      };
    },
  };
}

/** COSE algorithm labels notation signs with → the hash and the key kind. */
const COSE_ALGS = new Map<number, { hash: string; pss: boolean; bytes: number }>([
  [-37, { hash: "sha256", pss: true, bytes: 32 }],
  [-38, { hash: "sha384", pss: true, bytes: 48 }],
  [-39, { hash: "sha512", pss: true, bytes: 64 }],
  [-7, { hash: "sha256", pss: false, bytes: 32 }],
  [-35, { hash: "sha384", pss: false, bytes: 48 }],
  [-36, { hash: "sha512", pss: false, bytes: 64 }],
]);

const CBOR_OPTIONS = {
  useMaps: true,
  rejectDuplicateMapKeys: true,
  allowUndefined: false,
  tags: { 18: Tagged.decoder(18), 1: Tagged.decoder(1) } as unknown as never,
};

function cbor(bytes: Uint8Array, what: string): unknown {
  try {
    return cborDecode(bytes, CBOR_OPTIONS);
  } catch (e) {
    throw new Refused(`${what} is not valid CBOR: ${(e as Error).message}`);
  }
}

function readCose(bytes: Uint8Array): Opened {
  const top = cbor(bytes, "the COSE envelope");
  const sign1 = top instanceof Tagged && top.tag === 18 ? top.value : top;
  if (!Array.isArray(sign1) || sign1.length !== 4) {
    throw new Refused("the COSE envelope is not a COSE_Sign1");
  }
  const [prot, unprot, payload, signature] = sign1;
  if (
    !(prot instanceof Uint8Array) || !(unprot instanceof Map) ||
    !(payload instanceof Uint8Array) || !(signature instanceof Uint8Array)
  ) {
    throw new Refused("the COSE envelope is not a COSE_Sign1");
  }
  const x5 = unprot.get(33);
  const der = x5 instanceof Uint8Array ? [x5] : Array.isArray(x5) ? x5 : null;
  if (!der || der.some((d) => !(d instanceof Uint8Array))) {
    throw new Refused("the COSE header carries no x5chain");
  }
  if (der.length > LIMITS.certificates) {
    throw new Refused(`the certificate chain has more than ${LIMITS.certificates} certificates`);
  }
  const chain = parseChain(der as Uint8Array[]);
  return {
    chain,
    open(key) {
      const headers = cbor(prot, "the COSE protected header");
      if (!(headers instanceof Map)) throw new Refused("the COSE protected header is not a map");
      const alg = COSE_ALGS.get(headers.get(1) as number);
      if (!alg) throw new Refused(`unsupported COSE algorithm ${String(headers.get(1))}`);
      const crit = headers.get(2);
      if (crit !== undefined) {
        if (!Array.isArray(crit)) throw new Refused("the COSE crit header is not a list");
        const unknown = crit.find((c) => !KNOWN_CRITICAL.includes(c as string));
        if (unknown !== undefined) throw new Refused(`unknown critical header ${String(unknown)}`);
      }
      const toBeSigned = cborEncode(["Signature1", prot, new Uint8Array(0), payload]);
      const ok = cryptoVerify(
        alg.hash,
        toBeSigned,
        alg.pss
          ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: alg.bytes }
          : { key, dsaEncoding: "ieee-p1363" },
        signature,
      );
      if (!ok) throw new Refused("the envelope's signature does not verify");
      const expiry = headers.get(EXPIRY);
      return Promise.resolve({
        payload,
        contentType: headers.get(3),
        scheme: headers.get(SCHEME),
        expiry: expiry === undefined ? undefined : coseTime(expiry),
      });
    },
  };
}

/** A COSE time (tag 1 over seconds); Refused otherwise. */
function coseTime(v: unknown): number {
  const t = v instanceof Tagged && v.tag === 1 ? v.value : undefined;
  if (typeof t !== "number" || !Number.isFinite(t)) {
    throw new Refused("the envelope's expiry is not a time");
  }
  return t;
}
