// A default-deny Wharf behind its own token service in which only alice may do anything: the
// setup the real-client login tests share. The token realm must name the server's own port, so
// the port is picked before it starts.
import { hashPassword } from "../../lib/auth/mod.ts";
import { startServer, type TestServer } from "../helpers/server.ts";

export const ALICE = { username: "alice", password: "alice-pw" };

export async function startAliceOnlyServer(): Promise<TestServer> {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return await startServer({
    port,
    config: `
[auth.identity.alice]
username = "${ALICE.username}"
password = "${await hashPassword(ALICE.password)}"

[auth.token_service]
secret_key = "e2e-token-service-secret-of-more-than-32-bytes"
realm = "http://127.0.0.1:${port}/token"

[global.access_policy]
default = "deny"
rules = [
  'request.action in ["get-token", "healthz", "readyz"]',
  'has(identity.username) && identity.username == "${ALICE.username}"',
]
`,
  });
}
