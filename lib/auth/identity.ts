// Who made a request, as the access policy sees it (`identity` in CEL). Absent fields are left
// out so `has(identity.x)` is false for them. Every identity names the sign-in method that
// vouched for it (`provider`): a username is only unique within one method (an OIDC user may
// pick `ci` as their preferred_username, a certificate may say CN=ci), so rules and identity
// lists match provider and name together.

export interface CertificateSubject {
  common_name?: string;
  organizations: string[];
  organizational_units: string[];
}

/**
 * A client certificate the TLS layer received but did not verify (an untrusted CA, an X.509 v1
 * certificate, an expired one): the request is refused with 401 naming why, as wrong
 * credentials are, rather than served as anonymous.
 */
export interface RefusedCertificate {
  refused: string;
}

/** `identity.provider`: which sign-in method vouched for the identity. */
export type IdentityProvider = "basic" | "mtls" | "anonymous" | `oidc:${string}`;

export interface Identity {
  /** `[auth.identity.<id>]` id, OIDC `sub`, or the certificate's common name */
  id?: string;
  /** unique within `provider` only */
  username?: string;
  /**
   * `basic`, `oidc:<provider name>`, `mtls` or `anonymous`. A registry token carries the
   * provider of the credential it was exchanged for.
   */
  provider?: string;
  /** the OIDC provider's configured issuer */
  issuer?: string;
  /** verified OIDC claims */
  claims?: Record<string, unknown>;
  /** the verified client certificate of the live TLS connection */
  certificate?: CertificateSubject;
}

export const ANONYMOUS: Identity = Object.freeze({ provider: "anonymous" });

/** `identity.provider` of an OIDC provider's identities. */
export function oidcProvider(name: string): IdentityProvider {
  return `oidc:${name}`;
}

/** Credentials were presented and are wrong: 401, whatever the policy says. */
export class AuthenticationError extends Error {}
