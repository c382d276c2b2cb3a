// The HTTP app over a process's services, for serve and the Deno Deploy entry.
import { Authenticator, ClientIpResolver } from "../lib/auth/mod.ts";
import type { PolicySet } from "../lib/policy/mod.ts";
import { httpParts, type Services } from "../lib/services/mod.ts";
import { type AppServices, createApp } from "../routes/app.ts";

/**
 * `routes` holds `routes`'s view of the services; a config reload swaps its authenticator in
 * place (the policies adopt the new rules themselves).
 */
export function httpApp(s: Services, policies: PolicySet) {
  const routes: AppServices = {
    registry: s.registry,
    metrics: s.metrics,
    policies,
    authenticator: new Authenticator(s.cfg),
    clientIp: new ClientIpResolver(s.cfg.server.trustedProxies),
    layers: s.layers,
    reports: s.reports,
    watch: s.watch,
    ...httpParts(s),
  };
  return { app: createApp(routes), routes };
}
