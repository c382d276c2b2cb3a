// Reading request inputs the same way in every handler.
import { countedBody } from "./metrics.ts";
import { parseContentLength, RegistryError, truncate } from "../lib/oci/mod.ts";

/** Declared Content-Length; null when absent (chunked); 400 when malformed. */
export function contentLength(req: Request): number | null {
  const v = req.headers.get("content-length");
  if (v === null) return null;
  const n = parseContentLength(v);
  if (n === null) throw new RegistryError("UNSUPPORTED", `invalid Content-Length ${truncate(v)}`);
  return n;
}

/** Body stream (counted for metrics), or null when the request declares none. */
export function bodyOf(req: Request): ReadableStream<Uint8Array> | null {
  return countedBody(req);
}

/** A JSON 200 with its exact Content-Length; HEAD gets the headers only. */
export function jsonResponse(
  body: unknown,
  extra: Headers,
  head: boolean,
  contentType = "application/json",
): Response {
  const text = JSON.stringify(body);
  extra.set("Content-Type", contentType);
  extra.set("Content-Length", String(new TextEncoder().encode(text).byteLength));
  return new Response(head ? null : text, { status: 200, headers: extra });
}

/** `X-Svc-No-Redirect` with any non-empty value but `0`/`false` asks for an inline body. */
export function noRedirect(req: Request): boolean {
  const v = req.headers.get("x-svc-no-redirect")?.trim();
  return !!v && v !== "0" && v.toLowerCase() !== "false";
}
