// The verifier every process runs (`main.ts verify`, serve's schedule): the registry's quarantine
// over the configured stores (lib/registry/verify.ts); and the integrity figures of /metrics.
import { countQuarantines } from "../metadata/mod.ts";
import type { Metrics } from "../metrics/mod.ts";
import { type Registry, Verifier } from "../registry/mod.ts";
import { integrityFailureCounts, quarantinedCounts } from "../storage/mod.ts";

/** `holder` as in Verifier (the server passes its own name). */
export function verifierFor(
  s: { kv: Deno.Kv; registry: Pick<Registry, "quarantine"> },
  holder?: string,
): Verifier {
  return new Verifier(s.kv, s.registry.quarantine, holder);
}

/** Mismatches found and digests quarantined by this process, and the quarantined ones now. */
export function reportIntegrity(metrics: Metrics, kv: Deno.Kv): void {
  metrics.integrityFrom(
    () => ({ failures: integrityFailureCounts(), quarantined: quarantinedCounts() }),
    () => countQuarantines(kv),
  );
}
