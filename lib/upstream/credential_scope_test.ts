import assert from "node:assert/strict";
import { mayReceiveCredentials } from "./credential_scope.ts";

Deno.test("mayReceiveCredentials: only a realm on the upstream's registrable domain", async () => {
  const cases: [string, string, boolean][] = [
    ["https://auth.docker.io/token", "https://registry-1.docker.io", true],
    ["https://ghcr.io/token", "https://ghcr.io", true],
    ["https://login.example.co.uk/t", "https://registry.example.co.uk", true],
    ["https://AUTH.Example.com/t", "https://registry.example.com", true],
    ["https://auth.evil.com/token", "https://registry-1.docker.io", false],
    ["https://docker.io.evil.com/token", "https://registry-1.docker.io", false],
    // two tenants of one public or private suffix are two owners
    ["https://a.co.uk/t", "https://b.co.uk", false],
    ["https://alice.github.io/t", "https://bob.github.io", false],
    ["https://alice.s3.amazonaws.com/t", "https://bob.s3.amazonaws.com", false],
    // IP addresses and single labels: the very same host only
    ["http://127.0.0.1:9/token", "http://127.0.0.1:5000", true],
    ["http://localhost:9/token", "http://127.0.0.1:5000", false],
    ["http://127.0.0.1:9/token", "http://localhost:5000", false],
    ["http://localhost:9/token", "http://localhost:5000", true],
    ["http://10.0.0.2/token", "http://10.0.0.1", false],
    ["http://[::1]:9/token", "http://[::1]:5000", true],
    ["http://[::1]:9/token", "http://127.0.0.1:5000", false],
    ["http://registry/token", "http://registry", true],
    ["http://auth/token", "http://registry", false],
    // never from TLS to clear text
    ["http://auth.docker.io/token", "https://registry-1.docker.io", false],
    ["http://registry.example.com/token", "https://registry.example.com", false],
    ["https://auth.example.com/token", "http://registry.example.com", true],
  ];
  for (const [realm, upstream, want] of cases) {
    assert.equal(await mayReceiveCredentials(new URL(realm), new URL(upstream)), want, realm);
  }
});
