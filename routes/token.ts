// GET /token: exchanges the credential that authenticated this request for a registry token.
import { RegistryError } from "../lib/oci/mod.ts";
import type { RequestScope } from "./scope.ts";

export async function tokenHandler(
  { caller: ctx, services: { authenticator: auth }, access }: RequestScope,
): Promise<Response> {
  if (!auth.tokens) throw new RegistryError("NAME_UNKNOWN", "the token service is not configured");
  // A token cannot be renewed with itself: it must not outlive the credential it came from.
  if (ctx.auth.method === "token") throw access.unauthorized("registry tokens cannot be exchanged");
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
