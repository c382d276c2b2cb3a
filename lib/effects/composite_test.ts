import assert from "node:assert/strict";
import type { PlannedMutation } from "../kv/mod.ts";
import type { WriteFact } from "../metadata/mod.ts";
import { composeEffects } from "./composite.ts";
import type { EffectSubscriber, Outcome, WriteIntent } from "./mod.ts";

const INTENT: WriteIntent = { kind: "blob-push", ns: "a/b", digest: null };
const linked = (digest: string): WriteFact => ({ kind: "blob-linked", ns: "a/b", digest });
const mark = (name: string, digest: string): PlannedMutation => ({
  kind: "set",
  key: [name, digest],
  value: true,
});

/** A subscriber that plans one mutation per blob-linked fact and keeps what it was told. */
function recorder(name: string, outcomes: Outcome[], intents: WriteIntent[] = []) {
  return {
    begin(intent: WriteIntent) {
      intents.push(intent);
      return {
        mutationsFor: (f: WriteFact) => f.kind === "blob-linked" ? [mark(name, f.digest)] : [],
        committed: (o: Outcome) => void outcomes.push(o),
      };
    },
  } satisfies EffectSubscriber;
}

Deno.test("only the attempt that landed counts, for every subscriber, in subscriber order", async () => {
  const a: Outcome[] = [], b: Outcome[] = [];
  const intents: WriteIntent[] = [];
  const fx = await composeEffects([recorder("a", a, intents), recorder("b", b)]).begin(INTENT);
  assert.deepEqual(intents, [INTENT]);
  fx.attempt();
  assert.deepEqual(fx.mutationsFor(linked("lost")), [mark("a", "lost"), mark("b", "lost")]);
  fx.attempt(); // the first attempt conflicted and is rebuilt
  assert.deepEqual(fx.mutationsFor(linked("won")), [mark("a", "won"), mark("b", "won")]);
  fx.landed();
  await fx.committed();
  assert.deepEqual(a, [{
    landed: [{ fact: linked("won"), mutations: [mark("a", "won")] }],
    unwritten: [],
  }]);
  assert.deepEqual(b[0].landed.map((l) => l.mutations), [[mark("b", "won")]]);
});

Deno.test("several commits of one write all count; a fact without a commit is passed as unwritten", async () => {
  const out: Outcome[] = [];
  const fx = await composeEffects([recorder("a", out)]).begin(INTENT);
  fx.attempt();
  fx.mutationsFor(linked("one"));
  fx.landed();
  fx.attempt();
  fx.mutationsFor(linked("two"));
  fx.landed();
  fx.attempt();
  fx.mutationsFor(linked("never")); // built, then the write failed
  fx.unwritten(linked("had"));
  await fx.committed();
  assert.deepEqual(out[0].landed.map((l) => l.fact), [linked("one"), linked("two")]);
  assert.deepEqual(out[0].unwritten, [linked("had")]);
});

Deno.test("a subscriber with nothing to do for a write is left out; one that refuses stops it", async () => {
  const out: Outcome[] = [];
  const idle: EffectSubscriber = { begin: () => null };
  const fx = await composeEffects([idle, recorder("a", out)]).begin(INTENT);
  fx.attempt();
  assert.deepEqual(fx.mutationsFor(linked("d")), [mark("a", "d")]);
  const refusing: EffectSubscriber = {
    begin: () => Promise.reject(new Error("refused by a required webhook")),
  };
  const later: WriteIntent[] = [];
  await assert.rejects(
    composeEffects([refusing, recorder("b", [], later)]).begin(INTENT),
    /refused/,
  );
  assert.deepEqual(later, [], "subscribers after a refusal are not asked");
});
