// Signature verification (issue 34): the trust a repository's [verify] table configures, and the
// engine that checks a subject digest's signature artifacts (cosign tags, sigstore bundles,
// notation envelopes) against it, offline and within bounds: bytes in, a verdict out.
export * from "./types.ts";
export { verifySubject } from "./verify.ts";
export { trustFingerprint } from "./fingerprint.ts";
export { parseVerifyConfig } from "../config/mod.ts";
