// Verified before visible (issue 34): indexes under the platform rule, CEL rules reading the
// verdict (`image.verified`), and hostile signature material costing bounded work.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { cosignSignature, makeKey, pushSignature, verifyToml } from "../helpers/cosign.ts";
import {
  descOf,
  distinctManifest,
  imageIndex,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_INDEX,
  OCI_MANIFEST,
  putManifest,
} from "../helpers/oci_content.ts";
import { sha256 } from "../helpers/bytes.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

async function status(s: TestServer, ns: string, ref: string): Promise<number> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`);
  await r.body?.cancel();
  return r.status;
}

async function platformIndex(s: TestServer, ns: string) {
  const kids = [];
  for (const arch of ["amd64", "arm64"]) {
    const m = await distinctManifest(arch);
    assert.equal((await putManifest(s, ns, m.digest, m.body)).status, 201);
    kids.push({ ...m, arch });
  }
  const index = imageIndex(kids.map((k) => ({
    mediaType: OCI_MANIFEST,
    digest: k.digest,
    size: k.body.length,
    platform: { os: "linux", architecture: k.arch },
  })));
  return { kids, index: { body: index, digest: await sha256(index) } };
}

Deno.test(
  "verify indexes: the index's own signature covers its platforms; platforms = any needs one",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    const config = verifyToml("all", "enforce", { ci: key }) +
      verifyToml("any", "enforce", { ci: key }, `platforms = "any"`);
    await withServer({ config }, async (s) => {
      // platforms = "all" (the default), the index signed: it and both platforms are served.
      const a = await platformIndex(s, "all/app");
      assert.equal((await putManifest(s, "all/app", "v1", a.index.body, OCI_INDEX)).status, 201);
      assert.equal(await status(s, "all/app", "v1"), 403);
      for (const k of a.kids) assert.equal(await status(s, "all/app", k.digest), 403);
      const sig = await cosignSignature(key, "x/all/app", a.index.digest);
      assert.equal((await pushSignature(s, "all/app", sig)).status, 201);
      assert.equal(await status(s, "all/app", "v1"), 200);
      for (const k of a.kids) assert.equal(await status(s, "all/app", k.digest), 200, k.arch);

      // platforms = "any": one platform signed after the index was pushed releases the index;
      // the unsigned platform stays held.
      const b = await platformIndex(s, "any/app");
      assert.equal((await putManifest(s, "any/app", "v1", b.index.body, OCI_INDEX)).status, 201);
      assert.equal(await status(s, "any/app", "v1"), 403);
      const one = await cosignSignature(key, "x/any/app", b.kids[0].digest);
      assert.equal((await pushSignature(s, "any/app", one)).status, 201);
      assert.equal(await status(s, "any/app", "v1"), 200, "released by its signed platform");
      assert.equal(await status(s, "any/app", b.kids[0].digest), 200);
      assert.equal(await status(s, "any/app", b.kids[1].digest), 403);
    });
  },
);

Deno.test("verify CEL: a rule requires image.verified for one role", serverTestOpts, async () => {
  const key = await makeKey();
  const pw = "deploy-pw-1c2b";
  const user = `\n[auth.identity.deployer]\nusername = "deployer"\npassword = "${await hashPassword(
    pw,
    { memoryCost: 1024, timeCost: 1, parallelism: 1 },
  )}"\n`;
  const policy = `
[global.access_policy]
default = "allow"
rules = [
  'request.action == "get-manifest" && has(identity.username) && identity.username == "deployer" && !image.verified',
]
`;
  await withServer({ config: user + policy + verifyToml("w", "warn", { ci: key }) }, async (s) => {
    const deployer = { authorization: `Basic ${btoa(`deployer:${pw}`)}` };
    const m = await distinctManifest("cel");
    assert.equal((await putManifest(s, "w/app", "v1", m.body)).status, 201);
    const anon = await req(s, "/v2/w/app/manifests/v1");
    assert.equal(anon.status, 200, "warn serves everyone else");
    assert.match(anon.headers.get("warning") ?? "", /unsigned/);
    await anon.body?.cancel();
    const refused = await req(s, "/v2/w/app/manifests/v1", { headers: deployer });
    await assertErrorCode(refused, 403, "DENIED");
    const sig = await cosignSignature(key, "x/w/app", m.digest);
    assert.equal((await pushSignature(s, "w/app", sig)).status, 201);
    const ok = await req(s, "/v2/w/app/manifests/v1", { headers: deployer });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
    // A repository that verifies nothing: image.verified is false there.
    assert.equal((await putManifest(s, "plain/app", "v1", m.body)).status, 201);
    const off = await req(s, "/v2/plain/app/manifests/v1", { headers: deployer });
    await assertErrorCode(off, 403, "DENIED");
  });
});

const BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json";

Deno.test(
  "verify: hundreds of junk signature referrers cost bounded work; the .sig still counts",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("h", "enforce", { ci: key }) }, async (s) => {
      const ns = "h/app";
      const image = await distinctManifest("flooded");
      const junk = jsonBytes({
        mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
        x: "y",
      });
      await pushBlob(s.url, ns, junk);
      const empty = jsonBytes({});
      await pushBlob(s.url, ns, empty);
      const subject = { mediaType: OCI_MANIFEST, digest: image.digest, size: image.body.length };
      const N = 300;
      for (let i = 0; i < N; i++) {
        const body = imageManifest(await descOf("application/vnd.oci.empty.v1+json", empty), [
          await descOf(BUNDLE, junk),
        ], { artifactType: BUNDLE, subject, annotations: { n: String(i) } });
        const r = await putManifest(s, ns, await sha256(body), body);
        assert.equal(r.status, 201, await r.text());
      }
      const t0 = performance.now();
      assert.equal((await putManifest(s, ns, "v1", image.body)).status, 201);
      const pushMs = performance.now() - t0;
      assert.ok(pushMs < 5000, `the push judged ${N} referrers in ${pushMs} ms`);
      const st = await (await req(s, `/v2/${ns}/_svc/signatures/v1`)).json();
      assert.equal(st.held, true);
      assert.ok(st.signers.length <= 16, `${st.signers.length} signers kept`);
      assert.ok(st.signers.every((x: { valid: boolean }) => !x.valid));
      // The cosign signature is read first, whatever the referrers hold.
      const sig = await cosignSignature(key, `x/${ns}`, image.digest);
      const t1 = performance.now();
      assert.equal((await pushSignature(s, ns, sig)).status, 201);
      assert.ok(performance.now() - t1 < 5000);
      assert.equal(await status(s, ns, "v1"), 200);
    });
  },
);

Deno.test(
  "verify: a huge or deeply nested signature payload is refused within bounds",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("h", "enforce", { ci: key }) }, async (s) => {
      const ns = "h/app";
      for (
        const [name, payload] of [
          ["nested", new TextEncoder().encode("[".repeat(200_000) + "]".repeat(200_000))],
          ["huge", new TextEncoder().encode(JSON.stringify({ pad: "x".repeat(3 << 20) }))],
        ] as const
      ) {
        const image = await distinctManifest(name);
        assert.equal((await putManifest(s, ns, name, image.body)).status, 201);
        const config = jsonBytes({});
        await pushBlob(s.url, ns, payload);
        await pushBlob(s.url, ns, config);
        const layer = {
          ...(await descOf("application/vnd.dev.cosign.simplesigning.v1+json", payload)),
          annotations: { "dev.cosignproject.cosign/signature": "MEUCIQ==" },
        };
        const manifest = imageManifest(await descOf(OCI_CONFIG, config), [layer]);
        const tag = `sha256-${image.digest.slice(7)}.sig`;
        const t0 = performance.now();
        const r = await putManifest(s, ns, tag, manifest);
        assert.equal(r.status, 201, await r.text());
        assert.ok(performance.now() - t0 < 5000, `${name}: ${performance.now() - t0} ms`);
        const st = await (await req(s, `/v2/${ns}/_svc/signatures/${name}`)).json();
        assert.equal(st.held, true, name);
        assert.equal(st.signers[0]?.valid, false, name);
        assert.equal(await status(s, ns, name), 403);
      }
      // The server still answers at once.
      const t0 = performance.now();
      assert.equal((await req(s, "/v2/")).status, 200);
      assert.ok(performance.now() - t0 < 1000);
    });
  },
);

Deno.test(
  "verify: a signature racing its image's push always ends released",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("r", "enforce", { ci: key }) }, async (s) => {
      for (let i = 0; i < 12; i++) {
        const image = await distinctManifest(`race ${i}`);
        const sig = await cosignSignature(key, "x/r/app", image.digest);
        const [p, q] = await Promise.all([
          putManifest(s, "r/app", `t${i}`, image.body),
          pushSignature(s, "r/app", sig),
        ]);
        assert.equal(p.status, 201);
        assert.equal(q.status, 201);
        await p.body?.cancel();
        await q.body?.cancel();
        assert.equal(await status(s, "r/app", `t${i}`), 200, `race ${i}`);
      }
    });
  },
);

Deno.test(
  "verify: the referrers fallback tag and cosign's .att tag are never held",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("f", "enforce", { ci: key }) }, async (s) => {
      const image = await distinctManifest("subject");
      const att = await distinctManifest("attestation");
      const fallback = imageIndex([{
        mediaType: OCI_MANIFEST,
        digest: att.digest,
        size: att.body.length,
      }]);
      const hex = image.digest.slice("sha256:".length);
      for (
        const [tag, body, type] of [
          [`sha256-${hex}.att`, att.body, OCI_MANIFEST],
          [`sha256-${hex}`, fallback, OCI_INDEX],
        ] as const
      ) {
        const r = await putManifest(s, "f/app", tag, body, type);
        assert.equal(r.status, 201, await r.text());
        assert.equal(r.headers.get("warning"), null, tag);
        assert.equal(await status(s, "f/app", tag), 200, tag);
      }
    });
  },
);
