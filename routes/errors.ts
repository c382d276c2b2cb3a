// The one place errors become responses: `{errors:[{code,message,detail}]}`.
import type { Context } from "hono";
import { RegistryError } from "../lib/oci/mod.ts";
import { storeFaultAnswer } from "../lib/services/mod.ts";
import { log } from "../lib/log.ts";

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
