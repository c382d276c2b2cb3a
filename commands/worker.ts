// `main.ts worker [--queue Q]...`: drains queues without serving HTTP, so several processes
// share the work through one KV. Stops on SIGTERM/SIGINT after running jobs finish (or their
// grace runs out; their leases then expire and another worker takes them over).
import type { Config } from "../lib/config/mod.ts";
import { isUpstreamError } from "../lib/upstream/mod.ts";
import { openServices } from "../lib/services/mod.ts";
import { BlobStoreOpenError } from "../lib/storage/mod.ts";
import type { Cli } from "./cli.ts";
import { describe } from "./describe.ts";
import { PreflightError, refuseWithout } from "./preflight.ts";
import { aborted, closeServices, stopSignal } from "./shutdown.ts";
import { testCacheHoldMs } from "./test_env.ts";

/**
 * 0 after a stop; 2: an unreadable upstream ca_bundle, a blob store that cannot be reached, or a
 * permission the config needs.
 */
export async function workerCommand(cfg: Config, cli: Cli): Promise<number> {
  try {
    await worker(cfg, cli);
    return 0;
  } catch (e) {
    if (e instanceof PreflightError) {
      console.error(e.message);
      return 2;
    }
    if (!isUpstreamError(e) && !(e instanceof BlobStoreOpenError)) throw e;
    console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
    return 2;
  }
}

async function worker(cfg: Config, cli: Cli): Promise<void> {
  await refuseWithout(cfg);
  const services = await openServices(cfg, {
    role: "worker",
    queues: cli.queues,
    cacheHoldMs: testCacheHoldMs(),
  });
  const signal = stopSignal("wharf worker stopping: finishing running jobs");
  const concurrency = cfg.global.jobQueue.concurrency;
  const lanes = (services.runner?.queues ?? []).map((q) => `${q} (${concurrency[q]} at a time)`)
    .join(", ");
  console.log(
    `wharf worker draining ${lanes || "no job queue (every concurrency is 0)"}${
      services.outbox ? " and the webhook outbox" : ""
    }; serving no HTTP (${describe(cfg, false)})`,
  );
  console.log("press Ctrl+C to stop");
  await aborted(signal);
  await closeServices(services, "wharf worker");
}
