// GET /token: exchanges the credential that authenticated this request for a registry token.
import { RegistryError } from "../lib/oci/mod.ts";
import type { Authenticator } from "../lib/auth/mod.ts";
import type { RequestContext } from "./authorize.ts";

export async function tokenHandler(
  ctx: RequestContext,
  auth: Authenticator,
  unauthorized: () => RegistryError,
) {
  if (!auth.tokens) throw new RegistryError("NAME_UNKNOWN", "the token service is not configured");
  // A token cannot be renewed with itself: it must not outlive the credential it came from.
  if (ctx.auth.method === "token") throw unauthorized();
  const { certificate: _, ...identity } = ctx.auth.identity;
  const t = await auth.tokens.issue(identity);
  return new Response(JSON.stringify(t), {
    status: 200,
    headers: {
      "Content-Type": "application/json",
      "Cache-Control": "no-store",
      "Pragma": "no-cache",
    },
  });
}
