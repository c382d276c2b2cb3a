// What `serve` runs on a timer besides the job queues: scrub, verify, retention and the
// replication reconcile, each one run at a time (lib/jobs/periodic.ts), each off unless configured.
import { periodic } from "../jobs/mod.ts";
import { formatSummary, formatVerify } from "../registry/mod.ts";
import { formatPrune, prune } from "../retention/mod.ts";
import { auditedRun } from "../audit/mod.ts";
import { log } from "../log.ts";
import { scrubberFor } from "./scrubber.ts";
import { verifierFor } from "./verifier.ts";
import type { Services } from "./open.ts";

/** How often held images' expiry and the trust re-check are looked at. */
const SIGNATURE_SWEEP_MS = 1000;

/** The server's own lease name: a restarted server resumes the scrub lease of the one it replaces. */
const SERVE_SCRUB_HOLDER = "wharf serve";
/** Likewise for the verify lease. */
const SERVE_VERIFY_HOLDER = "wharf serve verify";

/** Starts the configured schedules; they stop when `signal` aborts. */
export function startSchedules(s: Services, signal: AbortSignal): void {
  scheduleScrub(s, signal);
  scheduleVerify(s, signal);
  scheduleReconcile(s, signal);
  schedulePrune(s, signal);
  scheduleSignatures(s, signal);
}

/**
 * Verified before visible (issue 34): holds that ran out, and the re-check of stored verdicts
 * when the configured trust changed (startup, a reload). Each tick is bounded; with nothing due
 * it is one short KV listing.
 */
function scheduleSignatures(s: Services, signal: AbortSignal): void {
  periodic("signature sweep", SIGNATURE_SWEEP_MS, async () => {
    for (let i = 0; i < 10 && !signal.aborted; i++) {
      const r = await s.registry.signatures.sweep();
      if (r.rechecked + r.rejected + r.expired > 0) log.info("signature sweep", { ...r });
      if (!r.more) return;
    }
  }, { signal });
}

/** `[global.scrub] interval_secs`: scrub inside the server. */
function scheduleScrub(s: Services, signal: AbortSignal): void {
  const every = s.cfg.global.scrub.intervalSecs;
  if (every === null) return;
  const scrubber = scrubberFor(s, SERVE_SCRUB_HOLDER);
  periodic("scheduled scrub", every * 1000, async () => {
    const t0 = performance.now();
    try {
      const r = await scrubber.run();
      if (!r) return;
      log.info(formatSummary(r));
      s.metrics.scrubFinished({
        ok: true,
        seconds: r.seconds,
        reclaimed: {
          blobs: r.blobs,
          bytes: r.bytes,
          uploads: r.uploads,
          namespaces: r.namespaces,
          pulls: r.pulls,
        },
      });
    } catch (e) {
      s.metrics.scrubFinished({
        ok: false,
        seconds: (performance.now() - t0) / 1000,
        reclaimed: {},
      });
      throw e;
    }
  }, { signal });
}

/**
 * `[global.integrity] interval_secs`: each tick starts a verify pass, or goes on with the one a
 * stop or a restart interrupted (its cursor), at `bytes_per_sec` as configured when it starts;
 * a tick that finds the pass still running is skipped. Stopping the server stops the pass
 * between two reads.
 */
function scheduleVerify(s: Services, signal: AbortSignal): void {
  const every = s.cfg.global.integrity.intervalSecs;
  if (every === null) return;
  const verifier = verifierFor(s, SERVE_VERIFY_HOLDER);
  // At startup too (`immediate`): a pass a stop interrupted goes on at once (`due`).
  periodic("scheduled verify", every * 1000, async (signal) => {
    if (!(await verifier.due(every * 1000))) return;
    let bytes = 0;
    try {
      const r = await verifier.run({
        bytesPerSec: s.cfg.global.integrity.bytesPerSec,
        signal,
        report: (line) => log.warn(`verify: ${line}`),
      });
      if ("held" in r) {
        log.info("scheduled verify skipped: another verify holds the lease", {
          holder: r.held.holder,
        });
        return;
      }
      bytes = r.runBytes;
      log.info(formatVerify(r));
      s.metrics.verifyFinished(r.complete ? "complete" : "stopped", bytes);
    } catch (e) {
      s.metrics.verifyFinished("failed", bytes);
      throw e;
    }
  }, { signal, immediate: true });
}

/** Reconcile inside the server for downstreams whose mode includes it. */
function scheduleReconcile(s: Services, signal: AbortSignal): void {
  const intervals = [...s.cfg.repositories.values()].flatMap((r) =>
    (r.downstreams ?? []).filter((d) => d.mode !== "event").map((d) => d.reconcileIntervalSecs)
  );
  if (intervals.length === 0) return;
  periodic("reconcile", Math.min(...intervals) * 1000, async (signal) => {
    const r = await s.replicator.reconcile(s.cfg, { scheduledOnly: true, signal });
    log.info("reconcile finished", { ...r, errors: JSON.stringify(r.errors) });
  }, { signal });
}

/**
 * `[global.retention_policy] interval_secs`: prune inside the server. The rules and dry_run are
 * read on each run, so a reload that changes them applies to the next one.
 */
function schedulePrune(s: Services, signal: AbortSignal): void {
  const { cfg, registry } = s;
  const every = cfg.global.retentionSchedule.intervalSecs;
  if (every === null) return;
  const pruneDeps = { kv: s.kv, manifests: registry.manifests };
  periodic("scheduled prune", every * 1000, async (signal) => {
    const dryRun = cfg.global.retentionSchedule.dryRun;
    const r = await auditedRun(registry.events.audit, "prune.run", () =>
      prune(cfg, pruneDeps, {
        dryRun,
        signal,
        report: (line) => log.info(`retention: ${dryRun ? "would " : ""}${line}`),
      }), (r) => formatPrune(r, dryRun));
    log.info(formatPrune(r, dryRun));
  }, { signal });
}
