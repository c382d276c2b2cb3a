// The one place errors become responses: `{errors:[{code,message,detail}]}`.
import type { Context } from "hono";
import { RegistryError, unavailable } from "../lib/oci/mod.ts";
import { storeFaultAnswer } from "../lib/services/mod.ts";
import { log } from "../lib/log.ts";

/** Retry-After of a request that failed for a machine reason (a sandbox that could not run). */
const MACHINE_RETRY_SECS = 5;

/** An error that says the machine failed (lib/sandbox's SandboxUnavailableError, and the like). */
function isMachineFailure(err: unknown): err is Error {
  return err instanceof Error && (err as { machine?: unknown }).machine === true;
}

export function errorResponse(err: unknown, c: Context): Response {
  let e: RegistryError;
  let fault: RegistryError | null;
  if (err instanceof RegistryError) {
    e = err;
  } else if ((fault = storeFaultAnswer(err)) !== null) {
    // A store that cannot take the request (full, failing, locked) where no store wrapper said so
    // already: 503 with its cause, as the stores' own answers are (lib/storage faults.ts).
    log.warn("request refused by a store", {
      method: c.req.method,
      path: new URL(c.req.url).pathname,
      error: fault.detail,
    });
    e = fault;
  } else if (isMachineFailure(err)) {
    // No sandbox could run, or one was killed from outside: the machine, not the request, and
    // another try may well succeed.
    log.warn("request could not run (machine)", {
      method: c.req.method,
      path: new URL(c.req.url).pathname,
      error: err.message,
    });
    e = unavailable(`${err.message}; retry later`, MACHINE_RETRY_SECS);
  } else {
    log.error("unhandled error", {
      method: c.req.method,
      path: new URL(c.req.url).pathname,
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
    e = new RegistryError("INTERNAL_ERROR", "");
  }
  const headers = new Headers({ "Content-Type": "application/json", ...e.headers });
  const body = c.req.method === "HEAD" ? null : JSON.stringify(e.body());
  return new Response(body, { status: e.status, headers });
}
