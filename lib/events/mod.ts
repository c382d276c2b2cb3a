// Event webhooks: events planned with the writes that cause them, delivered by `events` jobs.
export { type Actor, anonymousActor, currentActor, identifyActor, withActor } from "./actor.ts";
export {
  type Corruption,
  type EventFields,
  type SignatureFacts,
  type WharfEvent,
} from "./event.ts";
export { deliver, DeliveryError, signature, SIGNATURE_HEADER } from "./deliver.ts";
export { DIRECT_DELIVERIES_MAX, Events, FANOUT_KIND } from "./emitter.ts";
export { EventEffects } from "./write_effects.ts";
export { countOutbox, DELIVER_KIND, OutboxDrainer, type OutboxEntry } from "./outbox.ts";
