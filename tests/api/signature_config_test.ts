// Issue 34: a malformed [repository."<name>".verify] key, trusted root or identity pattern stops
// a real server's startup, naming the key; a well-formed one starts it.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { startServer } from "../helpers/server.ts";

async function refusesToStart(config: string, key: string): Promise<void> {
  await assert.rejects(startServer({ config }), (e: Error) => {
    assert.match(e.message, /before listening/);
    assert.ok(e.message.includes(key), e.message);
    return true;
  });
}

Deno.test("server: a malformed verify key, root or identity pattern stops startup naming it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await refusesToStart(
      `[repository."prod".verify]\nmode = "enforce"\n[repository."prod".verify.keys]\nci = "-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----"\n`,
      'repository."prod".verify.keys.ci: not a PEM public key',
    );
    const root = `${dir}/trusted_root.json`;
    await Deno.writeTextFile(root, "{ not json");
    await refusesToStart(
      `[repository."prod".verify]\nmode = "enforce"\n[repository."prod".verify.sigstore]\ntrusted_root = ${
        JSON.stringify(root)
      }\n`,
      'repository."prod".verify.sigstore.trusted_root: cannot read',
    );
    const good = new URL("../fixtures/signatures/cosign-trusted_root_pgi.json", import.meta.url)
      .pathname;
    await refusesToStart(
      `[repository."prod".verify]\nmode = "enforce"\n[repository."prod".verify.sigstore]\ntrusted_root = ${
        JSON.stringify(good)
      }\nidentities = [{ san_regex = "([", issuer = "https://x" }]\n`,
      'repository."prod".verify.sigstore.identities[0].san_regex: invalid regex',
    );

    const pem = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" });
    const keyFile = `${dir}/ci.pub`;
    await Deno.writeTextFile(keyFile, pem.toString());
    const s = await startServer({
      config: `[repository."prod".verify]\nmode = "warn"\n[repository."prod".verify.keys]\nci = ${
        JSON.stringify(keyFile)
      }\n`,
    });
    try {
      const r = await fetch(`${s.url}/v2/`);
      await r.body?.cancel();
      assert.equal(r.status, 200);
    } finally {
      await s.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
