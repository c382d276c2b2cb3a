// Write effects: one seam through which a write's facts become the jobs and events it causes,
// committed with the write. Subscribers implement EffectSubscriber in their own folders.
export type { WriteIntent } from "./intent.ts";
export type {
  EffectSubscriber,
  Landed,
  Outcome,
  SubscriberScope,
  WriteEffects,
  WriteScope,
} from "./write_effects.ts";
export { composeEffects } from "./composite.ts";
export type { WriteFact, WriteFacts } from "../metadata/mod.ts";
