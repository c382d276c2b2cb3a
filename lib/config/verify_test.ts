// [repository."<name>".verify]: what it accepts, that a malformed key, root or identity pattern
// is refused naming its key, and that a reload applies a changed table.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { buildConfig, ConfigError, ConfigReloader, loadConfigFiles } from "./mod.ts";

const pem = () =>
  generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({
    type: "spki",
    format: "pem",
  }).toString();

const repo = (verify: Record<string, unknown>) =>
  buildConfig({ repository: { prod: { verify } } }, ["wharf.toml"]).repositories.get("prod")!
    .verify;

function refused(verify: Record<string, unknown>, key: string, msg: RegExp): void {
  assert.throws(() => repo(verify), (e: Error) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.ok(
      e.message.startsWith(`config wharf.toml: repository."prod".verify${key}: `),
      e.message,
    );
    assert.match(e.message, msg);
    return true;
  });
}

Deno.test("verify: defaults, inline PEM and key files, platforms, threshold", async () => {
  assert.equal(
    buildConfig({ repository: { prod: {} } }, []).repositories.get("prod")!.verify,
    null,
  );
  const dir = await Deno.makeTempDir();
  const file = `${dir}/ci.pub`;
  await Deno.writeTextFile(file, pem());
  const v = repo({
    mode: "enforce",
    keys: { ci: file, release: pem() },
    threshold: 2,
    platforms: ["linux/amd64", "linux/arm64/v8"],
    hold_secs: 600,
    on_expiry: "delete",
  })!;
  assert.equal(v.mode, "enforce");
  assert.deepEqual(v.keys.map((k) => [k.name, k.algorithm]), [
    ["ci", "ecdsa-p256"],
    ["release", "ecdsa-p256"],
  ]);
  assert.match(v.keys[0].fingerprint, /^[a-f0-9]{64}$/);
  assert.deepEqual(v.platforms, ["linux/amd64", "linux/arm64/v8"]);
  assert.equal(v.threshold, 2);
  assert.equal(v.holdSecs, 600);
  assert.equal(v.onExpiry, "delete");
  const d = repo({ mode: "warn", keys: { ci: pem() } })!;
  assert.deepEqual(
    [d.threshold, d.platforms, d.holdSecs, d.onExpiry, d.sigstore, d.notation],
    [1, "all", 86_400, "keep", null, null],
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("verify: a malformed key, root or identity pattern is refused naming its key", async () => {
  const dir = await Deno.makeTempDir();
  const garbage = `${dir}/garbage.json`;
  await Deno.writeTextFile(garbage, '{"tlogs": "no"}');
  const empty = `${dir}/empty.json`;
  await Deno.writeTextFile(empty, "{}");
  const dsa = generateKeyPairSync("dsa", { modulusLength: 2048, divisorLength: 256 }).publicKey
    .export({ type: "spki", format: "pem" }).toString();
  refused(
    { mode: "enforce", keys: { ci: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----" } },
    ".keys.ci",
    /not a PEM public key/,
  );
  refused({ mode: "enforce", keys: { ci: `${dir}/missing.pub` } }, ".keys.ci", /cannot read/);
  refused({ mode: "enforce", keys: { ci: "/dev/zero" } }, ".keys.ci", /not a regular file/);
  refused({ mode: "enforce", keys: { ci: dsa } }, ".keys.ci", /ECDSA P-256\/P-384, Ed25519 or RSA/);
  refused({ mode: "enforce", keys: { "a b": pem() } }, ".keys.a b", /name must be/);
  const k = pem();
  refused({ mode: "enforce", keys: { a: k, b: k } }, ".keys.b", /same key as/);
  refused(
    { mode: "enforce", sigstore: { trusted_root: garbage, identities: [] } },
    ".sigstore.trusted_root",
    /not a usable sigstore trusted root/,
  );
  refused(
    { mode: "enforce", sigstore: { trusted_root: empty } },
    ".sigstore.trusted_root",
    /names no certificate authority and no transparency log/,
  );
  refused(
    { mode: "enforce", sigstore: { trusted_root: `${dir}/nope.json` } },
    ".sigstore.trusted_root",
    /cannot read/,
  );
  const root =
    new URL("../../tests/fixtures/signatures/cosign-trusted_root_pgi.json", import.meta.url)
      .pathname;
  refused(
    {
      mode: "enforce",
      sigstore: { trusted_root: root, identities: [{ san_regex: "(", issuer: "x" }] },
    },
    ".sigstore.identities[0].san_regex",
    /invalid regex/,
  );
  refused(
    {
      mode: "enforce",
      sigstore: { trusted_root: root, identities: [{ san: "a", san_regex: "b", issuer: "x" }] },
    },
    ".sigstore.identities[0].san",
    /set one of san and san_regex/,
  );
  refused(
    { mode: "enforce", sigstore: { trusted_root: root, identities: [{ san: "a" }] } },
    ".sigstore.identities[0].issuer",
    /set one of issuer and issuer_regex/,
  );
  const notationRoot =
    new URL("../../tests/fixtures/signatures/notation-NotationTestRoot.pem", import.meta.url)
      .pathname;
  refused(
    { mode: "enforce", notation: { trust_store: [notationRoot], identities: ["not a DN"] } },
    ".notation.identities[0]",
    /not a distinguished name/,
  );
  refused(
    { mode: "enforce", notation: { trust_store: [pem()], identities: ["*"] } },
    ".notation.trust_store[0]",
    /holds no PEM certificate/,
  );
  refused({ mode: "enforce" }, "", /needs keys, sigstore identities or a notation trust store/);
  refused({ mode: "strict" }, ".mode", /must be off, warn or enforce/);
  refused({ mode: "off", platforms: "some" }, ".platforms", /"all", "any" or a list/);
  refused({ mode: "off", platforms: ["linux"] }, ".platforms[0]", /os\/arch/);
  refused({ mode: "off", threshold: 0 }, ".threshold", /integer from 1/);
  refused({ mode: "off", on_expiry: "burn" }, ".on_expiry", /delete or keep/);
  refused({ mode: "off", extra: 1 }, ".extra", /unknown key/);
  // a valid notation table and a valid sigstore table read
  const ok = repo({
    mode: "enforce",
    sigstore: {
      trusted_root: root,
      identities: [{ san_regex: ".*@acme\\.com", issuer: "https://accounts.google.com" }],
    },
    notation: { trust_store: notationRoot, identities: ["x509.subject: C=US, O=Notary"] },
  })!;
  assert.equal(ok.sigstore!.identities.length, 1);
  assert.deepEqual(ok.notation!.identities, ["C=US, O=Notary"]);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("verify: a config reload applies a changed [verify] table, and refuses a broken one", async () => {
  const dir = await Deno.makeTempDir();
  const file = `${dir}/wharf.toml`;
  const a = pem();
  const b = pem();
  const toml = (keys: string) =>
    `[repository."prod".verify]\nmode = "enforce"\n[repository."prod".verify.keys]\n${keys}\n`;
  await Deno.writeTextFile(file, toml(`a = """${a}"""\nb = """${b}"""`));
  const live = await loadConfigFiles([file]);
  const reloader = new ConfigReloader(live, () => () => {});
  assert.deepEqual(live.repositories.get("prod")!.verify!.keys.map((k) => k.name), ["a", "b"]);

  await Deno.writeTextFile(file, toml(`a = """${a}"""`));
  assert.equal((await reloader.reload()).ok, true);
  assert.deepEqual(live.repositories.get("prod")!.verify!.keys.map((k) => k.name), ["a"]);

  await Deno.writeTextFile(
    file,
    toml(`a = "-----BEGIN PUBLIC KEY-----\\nAAAA\\n-----END PUBLIC KEY-----"`),
  );
  const r = await reloader.reload();
  assert.equal(r.ok, false);
  assert.match(r.error!, /repository."prod".verify.keys.a: not a PEM public key/);
  assert.deepEqual(live.repositories.get("prod")!.verify!.keys.map((k) => k.name), ["a"]);
  reloader.stop();
  await Deno.remove(dir, { recursive: true });
});
