// Signature verification (issue 34): the trust a repository's [verify] table configures, and the
// engine that checks a subject digest's signature artifacts (cosign tags, sigstore bundles,
// notation envelopes) against it, offline and within bounds: bytes in, a verdict out.
export * from "./types.ts";
export { checkSignature, type VerifyOptions, verifySubject } from "./verify.ts";
export { indexVerdict, type PlatformVerdict } from "./index_verdict.ts";
export { trustFingerprint } from "./fingerprint.ts";
export { LIMITS as SIGNATURE_LIMITS } from "./limits.ts";
export { parseVerifyConfig } from "../config/mod.ts";
export {
  BUNDLE_ANNOTATION,
  CERTIFICATE_ANNOTATION,
  CHAIN_ANNOTATION,
  SIGNATURE_ANNOTATION,
  SIMPLE_SIGNING,
} from "./cosign.ts";
export { BUNDLE_MEDIA_TYPE } from "./sigstore.ts";
export { COSE_MEDIA_TYPE, JWS_MEDIA_TYPE, NOTATION_ARTIFACT } from "./notation.ts";
