// OIDC bearer verification cost with a cached JWKS, RS256 and ES256, against a real local
// issuer. Run: deno run -A bench/oidc_bench.ts
import { OidcVerifier } from "../lib/auth/oidc.ts";
import { startIssuer } from "../tests/helpers/oidc_issuer.ts";

const iss = await startIssuer();
const v = new OidcVerifier(
  new Map([["corp", {
    name: "corp",
    issuer: iss.issuer,
    jwksUri: null,
    audience: ["wharf"],
    requiredClaims: {},
  }]]),
);
for (const alg of ["RS256", "ES256"]) {
  const token = await iss.sign({ sub: "u", aud: "wharf" }, { alg });
  for (let i = 0; i < 200; i++) await v.verify(token); // warm: discovery, JWKS, key import, JIT
  const samples: number[] = [];
  for (let i = 0; i < 3000; i++) {
    const t0 = performance.now();
    await v.verify(token);
    samples.push((performance.now() - t0) * 1000);
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.floor(samples.length * q)].toFixed(0);
  console.log(`${alg}: median ${at(0.5)} µs, p99 ${at(0.99)} µs (n=${samples.length})`);
}
await iss.close();
