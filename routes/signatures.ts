// GET /v2/<namespace>/_svc/signatures/<reference> (issue 34): an image's signature verdict —
// who signed it with which key or identity, in which format, verified when, and why not.
import type { RequestScope } from "./scope.ts";
import { isValidTag, RegistryError, truncate } from "../lib/oci/mod.ts";

export async function signaturesHandler(
  { action: a, registry: reg, headers, head, caller, access }: RequestScope,
): Promise<Response> {
  const ref = a.reference!;
  if (a.digest === undefined && !isValidTag(ref)) {
    throw new RegistryError("MANIFEST_UNKNOWN", `invalid tag ${truncate(ref)}`);
  }
  const status = await reg.signatures.status(a.namespace!, ref, {
    identity: caller.auth.identity,
    mayViewHeld: access.canViewHeld,
  });
  headers.set("Content-Type", "application/json");
  headers.set("Cache-Control", "no-store");
  return new Response(head ? null : JSON.stringify(status), { status: 200, headers });
}
