// The seam between a write and what it causes. A write begins with its intent, passes the scope
// to the metadata write as its one `effects` argument (WriteFacts), and ends with one
// `committed()`. Subscribers (events, replication, index, scan) live in their own folders and
// are composed once (lib/services/write_effects.ts).
import type { PlannedMutation } from "../kv/mod.ts";
import type { WriteFact, WriteFacts } from "../metadata/mod.ts";
import type { WriteIntent } from "./intent.ts";

/** A fact whose mutations were committed. */
export interface Landed {
  fact: WriteFact;
  mutations: PlannedMutation[];
}

/** What a write did, as one subscriber planned it. */
export interface Outcome {
  landed: Landed[];
  /** facts that happened without a commit of this write (a blob the namespace already had) */
  unwritten: WriteFact[];
}

/** One subscriber's part of one write. */
export interface SubscriberScope {
  mutationsFor(fact: WriteFact): PlannedMutation[];
  /** after the write: wake workers, enqueue what did not fit the commit, emit unwritten facts */
  committed(outcome: Outcome): void | Promise<void>;
}

export interface EffectSubscriber {
  /** null: this write causes nothing here. May throw to refuse the write before it starts. */
  begin(intent: WriteIntent): Promise<SubscriberScope | null> | SubscriberScope | null;
}

/** One write's scope: the metadata write's `effects` argument, plus the write's ending. */
export interface WriteScope extends WriteFacts {
  /** `fact` happened, but this write committed nothing for it */
  unwritten(fact: WriteFact): void;
  /** Once, after the write (also after one that failed: only landed facts count). */
  committed(): Promise<void>;
}

export interface WriteEffects {
  begin(intent: WriteIntent): Promise<WriteScope>;
}
