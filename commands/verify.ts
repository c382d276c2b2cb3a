// `main.ts verify [--dry-run] [--namespace N] [--rate BYTES_PER_SEC]`: one pass re-hashing the
// stored blobs (and the manifest bodies kept in KV) against their digests; what does not match
// is quarantined (lib/registry/quarantine.ts). Safe while servers run; Ctrl+C or SIGTERM stops
// it between two reads and the next run goes on from there.
import type { Config } from "../lib/config/mod.ts";
import { isValidName, RegistryError } from "../lib/oci/mod.ts";
import { formatVerify } from "../lib/registry/mod.ts";
import { verifierFor } from "../lib/services/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

/**
 * 0: the pass found nothing wrong; 1: another verify holds the lease, or the pass failed (a store
 * down: the next run goes on from its cursor); 2: a bad argument; 3: corrupt or missing bytes
 * were found (quarantined, or would be); 130: stopped by a signal.
 */
export function verifyCommand(cfg: Config, cli: Cli): Promise<number> {
  if (cli.namespace !== null && !isValidName(cli.namespace)) {
    console.error(`wharf: verify: --namespace ${cli.namespace} is not a repository name`);
    return Promise.resolve(2);
  }
  return withServices(cfg, async (services) => {
    const ac = new AbortController();
    const stop = () => ac.abort();
    const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
    for (const sig of signals) Deno.addSignalListener(sig, stop);
    let r;
    try {
      r = await verifierFor(services).run({
        dryRun: cli.dryRun,
        namespace: cli.namespace,
        bytesPerSec: cli.rate ?? cfg.global.integrity.bytesPerSec,
        signal: ac.signal,
        report: (line) => console.log(line),
      });
    } catch (e) {
      const detail = e instanceof RegistryError ? e.detail || e.message : String(e);
      console.error(`wharf: verify stopped: ${detail}; the next run goes on from where it was`);
      return 1;
    } finally {
      for (const sig of signals) Deno.removeSignalListener(sig, stop);
    }
    if ("held" in r) {
      console.error(
        `wharf: another verify holds the lease (${r.held.holder}, renewed ${
          new Date(r.held.at).toISOString()
        }); try again later`,
      );
      return 1;
    }
    for (const q of r.quarantinedNow) console.log(`quarantined: ${q}`);
    console.log(formatVerify(r));
    if (!r.complete) return 130;
    return r.corrupt + r.manifestsCorrupt + r.missing > 0 ? 3 : 0;
  });
}
