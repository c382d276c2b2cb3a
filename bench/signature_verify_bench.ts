// Verification CPU per signature (issue 34): verifySubject on one signature artifact, 1,000
// times per format, on real signatures made as the tests make them (tests/helpers/signing.ts):
// cosign tag (key-based ECDSA P-256, keyless with certificate and Rekor SET), sigstore bundles
// (key-based; keyless: Fulcio chain, SCT, Rekor inclusion), notation (JWS ES256, COSE ES256,
// and notation's own PS384 JWS vector). Reports CPU (user+system) and wall time per verification.
// Run: deno run -A bench/signature_verify_bench.ts [iterations]
import process from "node:process";
import { fileURLToPath } from "node:url";
import {
  bundleArtifact,
  cosignArtifact,
  cosignSign,
  ecKeys,
  keyBundle,
  NOTATION_TYPE,
  notationChain,
  notationCose,
  notationJws,
  pemOf,
  referrerArtifact,
  sha256,
  sigstoreWorld,
  simpleSigningPayload,
} from "../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../lib/config/mod.ts";
import { type SignatureArtifact, type VerifyConfig, verifySubject } from "../lib/signatures/mod.ts";

const N = Number(Deno.args[0] ?? 1000);
const IMAGE = sha256("an image manifest");
const FIXTURES = fileURLToPath(new URL("../tests/fixtures/signatures/", import.meta.url));
const dir = await Deno.makeTempDir();
const world = await sigstoreWorld();
const rootFile = `${dir}/trusted_root.json`;
await Deno.writeTextFile(rootFile, JSON.stringify(world.trustedRoot));

const ci = ecKeys();
const chain = await notationChain();
const cfg = parseVerifyConfig({
  mode: "enforce",
  keys: { ci: pemOf(ci.publicKey) },
  sigstore: {
    trusted_root: rootFile,
    identities: [{ san: "ci@example.com", issuer: "https://issuer.example" }],
  },
  notation: { trust_store: [chain.rootPem], identities: ["*"] },
});
const vectorCfg = parseVerifyConfig({
  mode: "enforce",
  notation: { trust_store: `${FIXTURES}notation-NotationTestRoot.pem`, identities: ["*"] },
});
const VECTOR_SUBJECT = "sha256:60043cf45eaebc4c0867fea485a039b598f52fd09fd5b07b0b2d2f88fad9d74e";

/**
 * Keyless signatures as they arrive: each with its own Fulcio leaf certificate, so each is
 * verified once (a leaf's checks are remembered: lib/signatures/cert_memo.ts); the CA's are shared.
 */
const FRESH = Math.min(N, 200);
async function fresh(make: () => Promise<SignatureArtifact>): Promise<SignatureArtifact[]> {
  const out: SignatureArtifact[] = [];
  for (let i = 0; i < FRESH + 21; i++) out.push(await make());
  return out;
}

const payload = simpleSigningPayload(IMAGE);
const cases: [string, string, SignatureArtifact | SignatureArtifact[], VerifyConfig][] = [
  [
    "cosign tag, key (P-256)",
    IMAGE,
    cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]),
    cfg,
  ],
  [
    "cosign tag, keyless (cert + Rekor SET)",
    IMAGE,
    await fresh(async () =>
      cosignArtifact([await world.keylessCosign(IMAGE, "ci@example.com", "https://issuer.example")])
    ),
    cfg,
  ],
  [
    "sigstore bundle, key + Rekor entry",
    IMAGE,
    bundleArtifact(await keyBundle(IMAGE, ci.privateKey, pemOf(ci.publicKey), world.url), IMAGE),
    cfg,
  ],
  [
    "sigstore bundle, keyless (Fulcio, SCT, Rekor)",
    IMAGE,
    await fresh(async () =>
      bundleArtifact(
        await world.keylessBundle(IMAGE, "ci@example.com", "https://issuer.example"),
        IMAGE,
      )
    ),
    cfg,
  ],
  ["notation JWS (ES256, 2-cert chain)", IMAGE, await notationJws(IMAGE, chain), cfg],
  ["notation COSE (ES256, 2-cert chain)", IMAGE, await notationCose(IMAGE, chain), cfg],
  [
    "notation JWS vector (PS384, RSA-3072)",
    VECTOR_SUBJECT,
    referrerArtifact(
      "notation",
      NOTATION_TYPE,
      "application/jose+json",
      await Deno.readFile(`${FIXTURES}notation-ca_valid_sig_env.json`),
      VECTOR_SUBJECT,
    ),
    vectorCfg,
  ],
];
await world.close();

console.log(
  `${N} verifications each (one artifact, one signature; keyless: ${FRESH} signatures, each ` +
    `with its own leaf certificate, verified once)`,
);
console.log("format".padEnd(48), "CPU µs/sig".padStart(11), "wall µs/sig".padStart(12));
for (const [name, subject, arts, c] of cases) {
  const pool = Array.isArray(arts) ? arts : [arts];
  const at = (i: number) => Array.isArray(arts) ? pool[21 + i] : pool[0];
  const first = await verifySubject(subject, [pool[0]], c);
  if (!first.verified) throw new Error(`${name}: ${first.reason}`);
  for (let i = 1; i <= 20; i++) await verifySubject(subject, [pool[i % pool.length]], c); // warm up
  const n = Array.isArray(arts) ? FRESH : N;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await verifySubject(subject, [at(i)], c);
  const wall = (performance.now() - t0) * 1000 / n;
  const cpu = process.cpuUsage(cpu0);
  console.log(
    name.padEnd(48),
    ((cpu.user + cpu.system) / n).toFixed(0).padStart(11),
    wall.toFixed(0).padStart(12),
  );
}
await Deno.remove(dir, { recursive: true });
