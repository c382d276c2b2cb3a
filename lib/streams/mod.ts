export { digestBytes, Hasher } from "./hasher.ts";
export { concatBytes } from "./concat.ts";
export { Scavenger } from "./scavenge.ts";
export {
  type Http1Answer,
  Http1Client,
  Http1Error,
  type Http1Request,
  proxyConfigured,
} from "./http1_client.ts";
export {
  type AddressClass,
  classifyAddress,
  fetchGuarded,
  OutboundGuard,
  type OutboundGuardOptions,
  OutboundRefused,
  parseCidr,
  parseIp,
  RedirectError,
  redirectTarget,
  type Resolver,
} from "./outbound.ts";
