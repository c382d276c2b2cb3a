// lib/services: the composition root. openServices builds, for one process role, the objects
// the rest of Wharf is made of (KV, blob store, metrics, job queues, registry, layer index,
// reports, replicator, syncer, outbox) and closes them again; the schedules and the scrubber
// every process shares are composed here too. It may import any other lib folder; no lib folder
// imports it (tests/boundaries_test.ts), only main.ts's commands/ and deploy/ do.
export { holderName, type OpenOptions, openServices, type Role, type Services } from "./open.ts";
export { startSchedules } from "./schedules.ts";
export { storeFaultAnswer } from "./store_faults.ts";
export { type HttpParts, httpParts } from "./http_parts.ts";
export { scrubberFor } from "./scrubber.ts";
export { verifierFor } from "./verifier.ts";
export { allWriteEffects, writeEffectsFor } from "./write_effects.ts";
