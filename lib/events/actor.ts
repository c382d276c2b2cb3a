// Who caused an event: the request's identity, carried from the HTTP edge to the code that
// plans the event without threading it through every registry call.
import { AsyncLocalStorage } from "node:async_hooks";

export interface Actor {
  username: string | null;
  id: string | null;
  client_ip: string | null;
}

const storage = new AsyncLocalStorage<Actor>();

const NOBODY: Actor = { username: null, id: null, client_ip: null };

/** Runs `fn` with `actor` as the cause of every event it emits. */
export function withActor<T>(actor: Actor, fn: () => T): T {
  return storage.run(actor, fn);
}

export function currentActor(): Actor {
  return storage.getStore() ?? NOBODY;
}
