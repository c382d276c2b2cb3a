// `main.ts serve` (the default command): the registry, the /v2/_svc API and the web UI over
// HTTP, with the job queues, the webhook outbox and the schedules in the same process.
import { type Config, ConfigReloader } from "../lib/config/mod.ts";
import { PolicyCompileError } from "../lib/policy/mod.ts";
import { RetentionCompileError } from "../lib/retention/mod.ts";
import { isUpstreamError } from "../lib/upstream/mod.ts";
import { openServices, startSchedules } from "../lib/services/mod.ts";
import { Authenticator } from "../lib/auth/mod.ts";
import { BlobStoreOpenError } from "../lib/storage/mod.ts";
import { describe } from "./describe.ts";
import { PreflightError, refuseWithout } from "./preflight.ts";
import { validated } from "./validate.ts";
import { listen, ListenError, listenError, probePort } from "./listen.ts";
import { httpApp } from "./http_app.ts";
import { closeServices, stopSignal } from "./shutdown.ts";
import { testCacheHoldMs } from "./test_env.ts";

/** 0 after a stop; 1: the port cannot be had; 2: the config cannot be served. */
export async function serveCommand(cfg: Config): Promise<number> {
  try {
    await serve(cfg);
    return 0;
  } catch (e) {
    if (e instanceof PreflightError) {
      console.error(e.message);
      return 2;
    }
    const listen = e instanceof ListenError ? e : listenError(cfg, e);
    if (listen) {
      console.error(`wharf: ${listen.message}`);
      return 1;
    }
    // A bad rule, an unreadable upstream ca_bundle or a blob store that cannot be reached (the
    // line names the setting) stops startup with a message.
    if (
      !(e instanceof PolicyCompileError) && !(e instanceof RetentionCompileError) &&
      !isUpstreamError(e) && !(e instanceof BlobStoreOpenError)
    ) throw e;
    console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
    return 2;
  }
}

async function serve(cfg: Config): Promise<void> {
  const policies = validated(cfg); // compile first: a bad rule stops startup before any I/O
  await refuseWithout(cfg);
  probePort(cfg);
  const services = await openServices(cfg, { role: "serve", cacheHoldMs: testCacheHoldMs() });
  const { registry, replicator } = services;
  const { app, routes } = httpApp(services, policies);
  // Edits to the config files (or SIGHUP) apply without a restart; see lib/config/reload.ts.
  const reloader = new ConfigReloader(cfg, (next) => {
    const nextPolicies = validated(next);
    const authenticator = new Authenticator(next);
    const upstreams = registry.pullThrough.prepareReload(next);
    const downstreams = replicator.prepareReload(next);
    return () => {
      policies.adopt(nextPolicies);
      routes.authenticator = authenticator;
      upstreams();
      downstreams();
      // A sync entry the reload added gets its first run queued (existing ones keep theirs).
      services.syncer.withConfig(next).schedule().catch(() => {});
    };
  }, (r) => {
    const restart = r.restart?.length ? `; needs a restart: ${r.restart.join(", ")}` : "";
    registry.events.audit.record({
      action: "config.reload",
      outcome: r.ok ? "ok" : "failed",
      detail: r.ok ? `${cfg.sources.join(", ")}${restart}` : r.error,
    });
  });
  reloader.start();
  const signal = stopSignal(
    "wharf stopping: finishing open requests and running jobs",
    () => reloader.stop(),
  );
  startSchedules(services, signal);
  await listen(cfg, (req, conn) => app.fetch(req, conn), signal, describe(cfg));
  await closeServices(services, "wharf");
}
