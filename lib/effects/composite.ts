// Fans a write out to a list of subscribers and keeps, per subscriber, only what the commits
// that landed carried.
import type { PlannedMutation } from "../kv/mod.ts";
import type { WriteFact } from "../metadata/mod.ts";
import type { WriteIntent } from "./intent.ts";
import type {
  EffectSubscriber,
  Landed,
  SubscriberScope,
  WriteEffects,
  WriteScope,
} from "./write_effects.ts";

class Scope implements WriteScope {
  private pending: { at: number; landed: Landed }[] = [];
  private readonly landedBy: Landed[][];
  private readonly unwrittenFacts: WriteFact[] = [];

  constructor(private readonly scopes: SubscriberScope[]) {
    this.landedBy = scopes.map(() => []);
  }

  attempt(): void {
    this.pending = [];
  }

  mutationsFor(fact: WriteFact): PlannedMutation[] {
    const out: PlannedMutation[] = [];
    this.scopes.forEach((s, at) => {
      const mutations = s.mutationsFor(fact);
      if (mutations.length === 0) return;
      this.pending.push({ at, landed: { fact, mutations } });
      out.push(...mutations);
    });
    return out;
  }

  landed(): void {
    for (const p of this.pending) this.landedBy[p.at].push(p.landed);
    this.pending = [];
  }

  unwritten(fact: WriteFact): void {
    this.unwrittenFacts.push(fact);
  }

  async committed(): Promise<void> {
    for (const [i, s] of this.scopes.entries()) {
      await s.committed({ landed: this.landedBy[i], unwritten: this.unwrittenFacts });
    }
  }
}

/** The effects of `subscribers`, asked in order (the order of their mutations in a commit). */
export function composeEffects(subscribers: EffectSubscriber[]): WriteEffects {
  return {
    async begin(intent: WriteIntent): Promise<WriteScope> {
      const scopes: SubscriberScope[] = [];
      for (const sub of subscribers) {
        const s = await sub.begin(intent);
        if (s) scopes.push(s);
      }
      return new Scope(scopes);
    },
  };
}
