// What an audit record needs from the request that caused it and that the code writing the
// record does not otherwise see: its request id and the action as authorized (a mount is a
// start-upload with ?mount=). Carried like the events actor, without threading it through calls.
import { AsyncLocalStorage } from "node:async_hooks";

export interface AuditContext {
  requestId: string | null;
  /** the CEL action, `mount-blob` for a start-upload with ?mount= */
  action: string | null;
  namespace?: string;
  reference?: string;
  digest?: string;
}

const storage = new AsyncLocalStorage<AuditContext>();

export function withAuditContext<T>(ctx: AuditContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentAuditContext(): AuditContext | null {
  return storage.getStore() ?? null;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** The client's X-Request-Id when it is a plain token of at most 64 characters, else a new one. */
export function requestIdOf(header: string | null): string {
  return header !== null && REQUEST_ID.test(header) ? header : crypto.randomUUID();
}
