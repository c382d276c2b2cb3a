// The background pass (lib/services schedules it): holds that ran out (on_expiry), and once per
// change of the configured trust every stored verdict made under other trust and every revision
// never judged, judged again.
import { repositoryOf, type VerifyConfig } from "../config/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import type { PlannedMutation, SignatureVerdict } from "../kv/mod.ts";
import { log } from "../log.ts";
import type { SignatureJudge, SignaturesDeps } from "./signature_judge.ts";
import type { SignatureHolds } from "./signature_holds.ts";

/** What one sweep did (lib/services schedules it). */
export interface SweepSummary {
  expired: number;
  rejected: number;
  rechecked: number;
  /** the trust re-check has more to do */
  more: boolean;
}

/** Holds handled per sweep; verdicts judged again per sweep; keys walked per sweep. */
const EXPIRIES_PER_SWEEP = 100;
const RECHECKS_PER_SWEEP = 100;
const KEYS_PER_SWEEP = 5000;

/** The sweep, and where its trust re-check walk is. */
export class SignatureSweep {
  /** the trust re-check walk: the fingerprints it works toward, and where it is */
  #walk: {
    goal: string | null;
    phase: "verdicts" | "unjudged" | "done";
    after: unknown;
  } = {
    goal: null, // never walked: the first sweep walks whatever the trust is
    phase: "done",
    after: null,
  };

  constructor(
    private readonly d: SignaturesDeps,
    private readonly judging: SignatureJudge,
    private readonly holds: SignatureHolds,
  ) {}

  /**
   * One bounded background pass: holds that ran out (on_expiry), then — once per change of
   * the configured trust (startup, a reload) — every stored verdict made under other trust and
   * every revision never judged, judged again; images that verified only through a removed key
   * are held again. Bounded per call (EXPIRIES_PER_SWEEP, RECHECKS_PER_SWEEP, KEYS_PER_SWEEP);
   * the next call goes on where this one stopped.
   */
  async sweep(now = Date.now()): Promise<SweepSummary> {
    const out: SweepSummary = {
      expired: 0,
      rejected: 0,
      rechecked: 0,
      more: false,
    };
    const goal = this.trustGoal();
    // Nothing verifies, and the walk since that became so is done (it showed what was held):
    // no hold can be due, nothing is to judge. A registry without [verify] pays nothing here.
    if (goal === "" && this.#walk.goal === "" && this.#walk.phase === "done") return out;
    for (const due of await this.d.meta.dueHolds(now, EXPIRIES_PER_SWEEP)) {
      const r = await this.expire(due.until, due.ns, due.digest);
      if (r === "rejected") out.rejected++;
      else if (r === "kept") out.expired++;
    }
    if (goal !== this.#walk.goal) {
      this.#walk = { goal, phase: "verdicts", after: null };
    }
    let keys = 0;
    if (this.#walk.phase === "verdicts") {
      for await (
        const e of this.d.meta.allVerdicts(
          this.#walk.after as Deno.KvKey | null,
        )
      ) {
        this.#walk.after = e.key;
        const cfg = this.judging.policyOf(e.ns);
        if (cfg && e.verdict.fingerprint !== this.judging.fingerprint(cfg)) {
          await this.holds.reconsider(e.ns, e.digest);
          out.rechecked++;
        } else if (!cfg && e.verdict.held) {
          // The repository verifies nothing any more: what waited is shown, tags and all.
          await this.unhold(e.ns, e.digest);
          out.rechecked++;
        }
        if (++keys >= KEYS_PER_SWEEP || out.rechecked >= RECHECKS_PER_SWEEP) {
          return { ...out, more: true };
        }
      }
      // With nothing verifying there is no revision to judge (the walk would list them all).
      this.#walk = { goal, phase: goal === "" ? "done" : "unjudged", after: null };
    }
    if (this.#walk.phase === "unjudged") {
      const after = this.#walk.after as [string, string] | null;
      for await (
        const r of this.d.meta.unjudged(
          after,
          (ns) => this.judging.policyOf(ns) !== null,
        )
      ) {
        this.#walk.after = [r.ns, r.digest];
        await this.holds.reconsider(r.ns, r.digest);
        out.rechecked++;
        if (out.rechecked >= RECHECKS_PER_SWEEP) return { ...out, more: true };
      }
      this.#walk = { goal, phase: "done", after: null };
    }
    return out;
  }

  /** The configured trust of every verifying repository, as one string (what a walk is for). */
  private trustGoal(): string {
    const parts: string[] = [];
    for (const rc of this.d.cfg.repositories.values()) {
      if (rc.verify && rc.verify.mode !== "off") {
        parts.push(
          `${rc.name}=${rc.verify.mode}:${this.judging.fingerprint(rc.verify)}`,
        );
      }
    }
    return parts.sort().join("\n");
  }

  /**
   * A hold that ran out: judged once more (a signature may have landed while its re-judgement
   * was lost to a crash), then deleted (image.rejected) or kept held (image.held, expired).
   */
  private async expire(
    until: number,
    ns: string,
    digest: string,
  ): Promise<"released" | "rejected" | "kept" | "gone"> {
    const cfg = this.judging.policyOf(ns);
    if (!cfg) {
      await this.unhold(ns, digest);
      await this.d.meta.forgetExpiry(until, ns, digest);
      return "released";
    }
    const v = await this.holds.reconsider(ns, digest);
    if (!v?.held || v.held.expired || v.held.until !== until) {
      await this.d.meta.forgetExpiry(until, ns, digest);
      return v && !v.held ? "released" : "gone";
    }
    const repo = repositoryOf(this.d.cfg, ns).name;
    if (cfg.onExpiry === "delete") {
      try {
        await this.d.deleteImage(ns, digest);
      } catch (e) {
        // An immutable tag (an image held again after a trust change) keeps it: held.
        if (!(e instanceof RegistryError) || e.code === "INTERNAL_ERROR") {
          throw e;
        }
        log.warn("held image not deleted when its hold ran out", {
          namespace: ns,
          digest,
          error: e.detail,
        });
        return await this.keep(until, ns, digest, cfg);
      }
      await this.d.meta.forgetExpiry(until, ns, digest);
      await this.d.meta.dropHeldTags(ns, digest, v.held.tags);
      if (this.d.events.wanted("image.rejected", ns)) {
        const e = this.d.events;
        const ev = e.event("image.rejected", {
          namespace: ns,
          digest,
          reference: digest,
        });
        ev.signature = {
          mode: cfg.mode,
          verified: false,
          reason: v.reason ?? null,
          signers: [],
          held_tags: v.held.tags,
          expired: true,
        };
        await e.emit(ev);
      }
      this.d.observe?.hold(repo, "rejected");
      log.info(
        "held image deleted: its hold ran out without a valid signature",
        {
          namespace: ns,
          digest,
          reason: v.reason ?? "",
        },
      );
      return "rejected";
    }
    return await this.keep(until, ns, digest, cfg);
  }

  /**
   * A held image of a repository whose [verify] was turned off (or removed): released without
   * a verdict, its waiting tags written, as a push there would now write them.
   */
  private async unhold(ns: string, digest: string): Promise<void> {
    for (let round = 0; round < 5; round++) {
      const { rev, verdict: cur, pin } = await this.d.meta.judgement(ns, digest);
      if (!rev || !cur?.held) return;
      const next: SignatureVerdict = { ...cur };
      delete next.held;
      const out = await this.holds.store(ns, digest, pin, next, cur.held.tags);
      if (out !== "stale") return;
    }
  }

  /** on_expiry = "keep": the image stays held, its expiry noted (no further expiry). */
  private async keep(
    until: number,
    ns: string,
    digest: string,
    cfg: VerifyConfig,
  ): Promise<"kept" | "gone"> {
    for (let round = 0; round < 5; round++) {
      const pin = await this.d.meta.pin(ns, digest);
      const cur = await this.d.meta.verdict(ns, digest);
      if (!cur?.held || cur.held.until !== until) return "gone";
      const next: SignatureVerdict = {
        ...cur,
        held: { ...cur.held, expired: true },
      };
      let planned: PlannedMutation[] = [];
      // Still held (expired): no tag is released.
      const out = await this.holds.store(
        ns,
        digest,
        pin,
        next,
        [],
        () => (planned = this.judging.plan("image.held", ns, digest, next, cfg, { expired: true })),
      );
      if (out === "stale") continue;
      if (out === "gone") return "gone";
      this.d.events.committed(planned);
      this.d.observe?.hold(repositoryOf(this.d.cfg, ns).name, "kept");
      log.info(
        "held image kept held: its hold ran out without a valid signature",
        {
          namespace: ns,
          digest,
        },
      );
      return "kept";
    }
    return "gone";
  }
}
