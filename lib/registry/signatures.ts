// Verified before visible (issue 34): the registry's side of signature verification. The engine
// (lib/signatures) turns artifacts into a verdict; this finds the artifacts a subject has here
// (its cosign `.sig` tag, its sigstore and notation referrers: bounded), judges a push before
// its commit (the verdict, and for an `enforce` repository the hold, ride in the push's commit),
// re-judges a subject when one of its signatures arrives (a release is one commit with the tags
// becoming visible), and answers the pull gate from the verdict stored beside the revision.
//
// Crypto runs on the push path, outside any KV retry loop: a commit whose pin (sigver) moved
// meanwhile sends the caller back to judge again. Pulls never verify: they read the verdict.
//
// The parts, one job each: signature_judge.ts (artifacts → a verdict), signature_holds.ts (a
// verdict stored: held, released), signature_push.ts (a push judged before its commit),
// signature_sweep.ts (expiries and the trust re-check) and signature_view.ts (the pull gate, the
// endpoint, the listings); Signatures below is the one object the registry holds.
import { SignatureJudge, type SignaturesDeps } from "./signature_judge.ts";
import { SignatureHolds } from "./signature_holds.ts";
import { SignaturePush } from "./signature_push.ts";
import { SignatureSweep } from "./signature_sweep.ts";
import { SignatureView } from "./signature_view.ts";

export {
  ARTIFACTS_MAX,
  CHILDREN_JUDGED_MAX,
  REFERRERS_SCANNED,
  type SignatureObserver,
  type SignaturesDeps,
} from "./signature_judge.ts";
export { record } from "./signature_verdict.ts";
export type { PushPlan } from "./signature_push.ts";
export type { SweepSummary } from "./signature_sweep.ts";
export type { ImageFacts, SignatureStatus } from "./signature_view.ts";

export class Signatures {
  readonly #judging: SignatureJudge;
  readonly #holds: SignatureHolds;
  readonly #push: SignaturePush;
  readonly #sweep: SignatureSweep;
  readonly #view: SignatureView;

  constructor(d: SignaturesDeps) {
    this.#judging = new SignatureJudge(d);
    this.#holds = new SignatureHolds(d, this.#judging);
    this.#push = new SignaturePush(d, this.#judging, this.#holds);
    this.#sweep = new SignatureSweep(d, this.#judging, this.#holds);
    this.#view = new SignatureView(d, this.#judging, this.#holds);
  }

  // judging (signature_judge.ts)
  policyOf(...a: Parameters<SignatureJudge["policyOf"]>) {
    return this.#judging.policyOf(...a);
  }
  fingerprint(...a: Parameters<SignatureJudge["fingerprint"]>) {
    return this.#judging.fingerprint(...a);
  }
  artifactsOf(...a: Parameters<SignatureJudge["artifactsOf"]>) {
    return this.#judging.artifactsOf(...a);
  }
  judge(...a: Parameters<SignatureJudge["judge"]>) {
    return this.#judging.judge(...a);
  }
  coveringIndex(...a: Parameters<SignatureJudge["coveringIndex"]>) {
    return this.#judging.coveringIndex(...a);
  }
  plan(...a: Parameters<SignatureJudge["plan"]>) {
    return this.#judging.plan(...a);
  }

  // verdicts stored, holds and releases (signature_holds.ts)
  reconsider(...a: Parameters<SignatureHolds["reconsider"]>) {
    return this.#holds.reconsider(...a);
  }

  // a push (signature_push.ts)
  pinKey(...a: Parameters<SignaturePush["pinKey"]>) {
    return this.#push.pinKey(...a);
  }
  planPush(...a: Parameters<SignaturePush["planPush"]>) {
    return this.#push.planPush(...a);
  }
  afterPush(...a: Parameters<SignaturePush["afterPush"]>) {
    return this.#push.afterPush(...a);
  }

  // the background pass (signature_sweep.ts)
  sweep(...a: Parameters<SignatureSweep["sweep"]>) {
    return this.#sweep.sweep(...a);
  }

  // what readers see (signature_view.ts)
  rowStates(...a: Parameters<SignatureView["rowStates"]>) {
    return this.#view.rowStates(...a);
  }
  isHeld(...a: Parameters<SignatureView["isHeld"]>) {
    return this.#view.isHeld(...a);
  }
  gate(...a: Parameters<SignatureView["gate"]>) {
    return this.#view.gate(...a);
  }
  gateDigest(...a: Parameters<SignatureView["gateDigest"]>) {
    return this.#view.gateDigest(...a);
  }
  status(...a: Parameters<SignatureView["status"]>) {
    return this.#view.status(...a);
  }
  imageFacts(...a: Parameters<SignatureView["imageFacts"]>) {
    return this.#view.imageFacts(...a);
  }
}
