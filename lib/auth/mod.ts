// Who is asking: credentials (TLS client certificate, registry token, OIDC bearer, Basic) turned
// into an Identity, the client IP a policy sees, password hashes, `GET /token`'s tokens and the
// authorization webhook asked after the CEL policies allow.
export * from "./identity.ts";
export { Authenticator, type AuthMethod, type AuthResult } from "./authenticator.ts";
export { ClientIpResolver } from "./client_ip.ts";
export { hashPassword } from "./password.ts";
export {
  AuthorizationWebhooks,
  type AuthzDecision,
  type AuthzRequest,
  type ObserveAuthz,
} from "./authz_webhook.ts";
