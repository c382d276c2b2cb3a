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
