// Who made a request, as the access policy sees it (`identity` in CEL). Absent fields are left
// out so `has(identity.x)` is false for them; anonymous is the empty identity.

export interface CertificateSubject {
  common_name?: string;
  organizations: string[];
  organizational_units: string[];
}

export interface Identity {
  /** `[auth.identity.<id>]` id, OIDC `sub`, or the certificate's common name */
  id?: string;
  username?: string;
  /** OIDC provider name, or `basic`, `token` (unused: a registry token carries its origin), `mtls` */
  provider?: string;
  /** verified OIDC claims */
  claims?: Record<string, unknown>;
  /** the verified client certificate of the live TLS connection */
  certificate?: CertificateSubject;
}

export const ANONYMOUS: Identity = Object.freeze({});

/** Credentials were presented and are wrong: 401, whatever the policy says. */
export class AuthenticationError extends Error {}
