// The one place errors become responses: `{errors:[{code,message,detail}]}`.
import type { Context } from "hono";
import { RegistryError } from "../lib/oci/mod.ts";
import { log } from "../lib/log.ts";

export function errorResponse(err: unknown, c: Context): Response {
  let e: RegistryError;
  if (err instanceof RegistryError) {
    e = err;
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
