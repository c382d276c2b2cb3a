// Who caused an event: the request's identity, carried from the HTTP edge to the code that
// plans the event without threading it through every registry call.
import { AsyncLocalStorage } from "node:async_hooks";

export interface Actor {
  username: string | null;
  id: string | null;
  /** identity.provider: a username is unique within its sign-in method only (absent: the
   * server itself, or an event recorded before providers existed) */
  provider?: string | null;
  client_ip: string | null;
}

const storage = new AsyncLocalStorage<Actor>();

const NOBODY: Actor = { username: null, id: null, provider: null, client_ip: null };

/** Runs `fn` with `actor` as the cause of every event it emits. */
export function withActor<T>(actor: Actor, fn: () => T): T {
  return storage.run(actor, fn);
}

export function currentActor(): Actor {
  return storage.getStore() ?? NOBODY;
}

/** A request's actor before it is authenticated; identifyActor fills it in. */
export function anonymousActor(): Actor {
  return { username: null, id: null, provider: null, client_ip: null };
}

/** Sets who the current request is (within withActor; elsewhere a no-op). */
export function identifyActor(a: Actor): void {
  const cur = storage.getStore();
  if (cur) Object.assign(cur, a);
}
