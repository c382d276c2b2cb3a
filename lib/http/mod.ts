// Outbound HTTP: where a request that Wharf sends may go (the address guard for redirects, token
// realms and discovered URLs: outbound.ts) and the pooled keep-alive HTTP/1.1 client that S3 part
// uploads and webhook deliveries use instead of fetch (http1_client.ts says why).
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
