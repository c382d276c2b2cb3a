// Blob upload sessions: POST (start, monolithic, mount), PATCH, GET status, PUT, DELETE.
// SPEC §Blob upload and its state table.
//
// The parts, one job each: upload_start.ts (POST: a session started, a blob mounted or uploaded
// whole, the quota's room), upload_append.ts (a session's chunks appended under its lock, its
// offset committed, a session rejected) and upload_complete.ts (PUT completing a session, DELETE
// cancelling it); Uploads below is the one object the registry holds.
import { UploadAppend, type UploadDeps } from "./upload_append.ts";
import { UploadStart } from "./upload_start.ts";
import { UploadCompletion } from "./upload_complete.ts";

export { type BodyInput, rangeHeaders, type UploadDeps } from "./upload_append.ts";
export type { StartInput, StartResult } from "./upload_start.ts";

export class Uploads {
  readonly #appending: UploadAppend;
  readonly #starting: UploadStart;
  readonly #completion: UploadCompletion;

  constructor(d: UploadDeps) {
    this.#appending = new UploadAppend(d);
    this.#starting = new UploadStart(d, this.#appending);
    this.#completion = new UploadCompletion(d, this.#appending, this.#starting);
  }

  // POST (upload_start.ts)
  start(...a: Parameters<UploadStart["start"]>) {
    return this.#starting.start(...a);
  }

  // a session's status and chunks (upload_append.ts)
  status(...a: Parameters<UploadAppend["status"]>) {
    return this.#appending.status(...a);
  }
  patch(...a: Parameters<UploadAppend["patch"]>) {
    return this.#appending.patch(...a);
  }

  // PUT and DELETE (upload_complete.ts)
  complete(...a: Parameters<UploadCompletion["complete"]>) {
    return this.#completion.complete(...a);
  }
  cancel(...a: Parameters<UploadCompletion["cancel"]>) {
    return this.#completion.cancel(...a);
  }
}
