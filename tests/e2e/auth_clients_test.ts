// Real clients (skopeo, podman) against a default-deny Wharf with per-user rules: alice may push
// and pull team/app only, bob may only pull it, anonymous gets nothing but the probes. Run twice:
// with Basic only, and with the token service on (clients then trade their password at /token
// for a registry bearer token). One server per configuration, shared by the steps in order.
import assert from "node:assert/strict";
import { hashPassword } from "../../lib/auth/mod.ts";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { startServer, type TestServer } from "../helpers/server.ts";
import { makePodman, type Podman, podmanMissing } from "./_podman.ts";
import {
  buildImages,
  type Images,
  layoutRefs,
  missingTools,
  readBlob,
  type Run,
  skopeo,
  skopeoOk,
} from "./_skopeo.ts";

const skipReason = missingTools();
// podman's own check runs even when skopeo is missing, so WHARF_REQUIRE_TOOLS=1 names both.
const podmanSkip = podmanMissing() ?? skipReason;
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());

const ALICE = "alice:alice-pw";
const BOB = "bob:bob-pw";
const AUDITOR = "auditor:auditor-pw";
const SECRET = "auth-clients-test-secret-of-more-than-32-bytes";

const identities = skipReason ? "" : `
[auth.identity.alice]
username = "alice"
password = "${await hashPassword("alice-pw")}"

[auth.identity.bob]
username = "bob"
password = "${await hashPassword("bob-pw")}"

# Read-only observer for the assertions on registry state and metrics; no client runs as it.
[auth.identity.auditor]
username = "auditor"
password = "${await hashPassword("auditor-pw")}"
`;

// get-api-version is NOT granted to anonymous: containers/image (and docker) ping /v2/ without
// credentials and send credentials only when that ping answers 401 with a challenge. Granting
// /v2/ to everyone would make every later request anonymous, whatever --creds says.
const POLICY = `
[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-token"]',
  'has(identity.username) && request.action == "get-api-version"',
  'has(identity.username) && identity.username == "alice" && has(request.namespace) && request.namespace == "team/app"',
  'has(identity.username) && identity.username == "bob" && has(request.namespace) && request.namespace == "team/app" && request.action in ["get-manifest", "get-blob", "list-tags", "get-referrers"]',
  'has(identity.username) && identity.username == "auditor" && request.action in ["list-tags", "list-catalog", "metrics"]',
]
`;

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function basicHeader(creds: string): Record<string, string> {
  return { authorization: `Basic ${btoa(creds)}` };
}

/** A port nobody listens on right now, so the token realm can name the server's own URL. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

interface Setup {
  name: string;
  token: boolean;
}

const SETUPS: Setup[] = [{ name: "Basic only", token: false }, {
  name: "token service",
  token: true,
}];

async function start(setup: Setup): Promise<TestServer> {
  if (!setup.token) return await startServer({ config: identities + POLICY });
  // The realm must be this server's own /token, so the port is chosen before it starts; another
  // process grabbing it in between is retried rather than failed.
  for (let attempt = 0;; attempt++) {
    const port = freePort();
    const config = `${identities}
[auth.token_service]
secret_key = "${SECRET}"
realm = "http://127.0.0.1:${port}/token"
ttl_secs = 300
${POLICY}`;
    try {
      return await startServer({ config, port });
    } catch (e) {
      if (attempt >= 2) throw e;
    }
  }
}

function ref(s: TestServer, name: string): string {
  return `docker://127.0.0.1:${s.port}/${name}`;
}

function oci(dir: string, name: string): string {
  return `oci:${dir}:${name}`;
}

/** Tags of a namespace as the auditor sees them over plain HTTP; null when it has none. */
async function tagsOf(s: TestServer, ns: string): Promise<string[] | null> {
  const r = await req(s, `/v2/${ns}/tags/list`, { headers: basicHeader(AUDITOR) });
  if (r.status === 404) {
    await assertErrorCode(r, 404, "NAME_UNKNOWN");
    return null;
  }
  const text = await r.text();
  assert.equal(r.status, 200, `tags of ${ns}: ${text}`);
  return [...JSON.parse(text).tags].sort();
}

/** Whether a blob exists in team/app, asked as alice (who may read there). */
async function blobInTeamApp(s: TestServer, digest: string): Promise<boolean> {
  const r = await req(s, `/v2/team/app/blobs/${digest}`, {
    method: "HEAD",
    headers: basicHeader(ALICE),
  });
  await r.body?.cancel();
  assert.ok(r.status === 200 || r.status === 404, `HEAD blob ${digest}: ${r.status}`);
  return r.status === 200;
}

/** A client refusal: non-zero exit and an error that names the refusal, not a crash or hang. */
function assertRefused(r: Run, what: string, re: RegExp): void {
  assert.notEqual(r.code, 0, `${what} should have failed; stdout:\n${r.stdout}`);
  assert.match(r.stderr, re, `${what}: unexpected error:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /panic|goroutine|connection reset|EOF/i, `${what}: ${r.stderr}`);
}

const DENIED = /denied|forbidden|403/i;
const UNAUTHORIZED = /unauthorized|authentication required|invalid username\/password|401/i;
// With the token service a client without credentials first buys an anonymous token, and the
// refusal of that token decides the message; its status is pinned by the HTTP step below.
const ANON_REFUSED = /unauthorized|authentication required|denied|forbidden|40[13]/i;

/** The auth-attempt counters by `method/result`, read from /metrics as the auditor. */
async function authAttempts(s: TestServer): Promise<Record<string, number>> {
  const r = await req(s, "/metrics", { headers: basicHeader(AUDITOR) });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  const out: Record<string, number> = {};
  const re = /^wharf_auth_attempts_total\{method="([^"]+)",result="([^"]+)"\} (\d+)/gm;
  for (const m of text.matchAll(re)) out[`${m[1]}/${m[2]}`] = Number(m[3]);
  return out;
}

async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-e2e-auth-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

for (const setup of SETUPS) {
  Deno.test({
    ...serverTestOpts,
    ignore: skipReason !== null,
    name: `auth clients (${setup.name}): skopeo and podman against per-user rules`,
    fn: async (t) => {
      const s = await start(setup);
      try {
        await steps(t, s, setup);
      } finally {
        await s.stop();
        await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
      }
    },
  });
}

async function steps(t: Deno.TestContext, s: TestServer, setup: Setup): Promise<void> {
  const im = img();
  const host = `127.0.0.1:${s.port}`;
  const realm = `http://${host}/token`;

  await t.step("anonymous: probes answer, /v2/ is the challenge clients follow", async () => {
    for (const p of ["/healthz", "/readyz"]) {
      const r = await req(s, p);
      await r.body?.cancel();
      assert.equal(r.status, 200, p);
    }
    const v2 = await req(s, "/v2/");
    const challenge = v2.headers.get("www-authenticate") ?? "";
    await assertErrorCode(v2, 401, "UNAUTHORIZED");
    if (setup.token) {
      assert.match(challenge, /^Bearer /i);
      assert.ok(challenge.includes(`realm="${realm}"`), challenge);
      assert.ok(challenge.includes(`service="${host}"`), challenge);
    } else {
      assert.match(challenge, /^Basic realm="wharf"/i);
    }
    const ok = await req(s, "/v2/", { headers: basicHeader(ALICE) });
    await ok.body?.cancel();
    assert.equal(ok.status, 200);
  });

  await t.step("alice copies an image to team/app", async () => {
    await skopeoOk([
      "copy",
      "--dest-tls-verify=false",
      "--dest-creds",
      ALICE,
      oci(im.layout, "v1"),
      ref(s, "team/app:v1"),
    ], s);
    assert.deepEqual(await tagsOf(s, "team/app"), ["v1"]);
  });

  await t.step("bob inspects it and copies it back byte for byte", async () => {
    const info = JSON.parse(
      (await skopeoOk(["inspect", "--tls-verify=false", "--creds", BOB, ref(s, "team/app:v1")], s))
        .stdout,
    );
    assert.equal(info.Digest, im.v1.digest);
    assert.deepEqual(info.Layers, im.v1.layers);

    await withTempDir(async (dir) => {
      await skopeoOk([
        "copy",
        "--src-tls-verify=false",
        "--src-creds",
        BOB,
        "--preserve-digests",
        ref(s, "team/app:v1"),
        oci(dir, "pulled"),
      ], s);
      assert.deepEqual(await layoutRefs(dir), { pulled: im.v1.digest });
      for (const d of [im.v1.digest, im.v1.config, ...im.v1.layers]) {
        assert.deepEqual(await readBlob(dir, d), await readBlob(im.layout, d), `blob ${d}`);
      }
    });
  });

  await t.step("bob cannot push: refused, registry unchanged", async () => {
    // New blobs: refused at the first upload.
    const multi = await skopeo([
      "copy",
      "--all",
      "--dest-tls-verify=false",
      "--dest-creds",
      BOB,
      oci(im.layout, "multi"),
      ref(s, "team/app:bob"),
    ]);
    assertRefused(multi, "bob pushing new blobs", DENIED);
    // Blobs already there: everything up to the manifest PUT is a read, and that PUT is refused.
    const retag = await skopeo([
      "copy",
      "--dest-tls-verify=false",
      "--dest-creds",
      BOB,
      oci(im.layout, "v1"),
      ref(s, "team/app:bob"),
    ]);
    assertRefused(retag, "bob tagging existing content", DENIED);
    assert.deepEqual(await tagsOf(s, "team/app"), ["v1"]);
    const multiLayout = JSON.parse(
      new TextDecoder().decode(await readBlob(im.layout, im.multi.amd64)),
    );
    assert.equal(await blobInTeamApp(s, multiLayout.layers[0].digest), false);
  });

  await t.step("alice cannot push outside team/app", async () => {
    const r = await skopeo([
      "copy",
      "--dest-tls-verify=false",
      "--dest-creds",
      ALICE,
      oci(im.layout, "v1"),
      ref(s, "other/repo:v1"),
    ]);
    assertRefused(r, "alice pushing other/repo", DENIED);
    assert.equal(await tagsOf(s, "other/repo"), null);
  });

  await t.step("no credentials: inspect and list-tags are refused", async () => {
    const inspect = await skopeo(["inspect", "--tls-verify=false", ref(s, "team/app:v1")]);
    assertRefused(
      inspect,
      "anonymous inspect",
      setup.token ? ANON_REFUSED : UNAUTHORIZED,
    );
    const tags = await skopeo(["list-tags", "--tls-verify=false", ref(s, "team/app")]);
    assertRefused(tags, "anonymous list-tags", setup.token ? ANON_REFUSED : UNAUTHORIZED);
  });

  await t.step("wrong password and unknown user are refused", async () => {
    for (const creds of ["alice:not-the-password", "mallory:alice-pw"]) {
      const r = await skopeo([
        "inspect",
        "--tls-verify=false",
        "--creds",
        creds,
        ref(s, "team/app:v1"),
      ]);
      assertRefused(r, `inspect as ${creds}`, UNAUTHORIZED);
      const push = await skopeo([
        "copy",
        "--dest-tls-verify=false",
        "--dest-creds",
        creds,
        oci(im.layout, "v1"),
        ref(s, "team/app:wrong"),
      ]);
      assertRefused(push, `push as ${creds}`, UNAUTHORIZED);
    }
    assert.deepEqual(await tagsOf(s, "team/app"), ["v1"]);
  });

  await t.step("list-tags with credentials", async () => {
    for (const creds of [ALICE, BOB]) {
      const r = await skopeoOk(
        ["list-tags", "--tls-verify=false", "--creds", creds, ref(s, "team/app")],
        s,
      );
      const list = JSON.parse(r.stdout);
      assert.equal(list.Repository, `127.0.0.1:${s.port}/team/app`);
      assert.deepEqual(list.Tags, ["v1"]);
    }
  });

  if (setup.token) {
    await t.step(
      "an anonymous registry token is refused like anonymous: 401 challenge",
      async () => {
        const tr = await req(s, `/token?service=${host}&scope=repository:team/app:pull`);
        const { token } = await tr.json();
        assert.equal(tr.status, 200);
        const r = await req(s, "/v2/team/app/manifests/v1", {
          headers: { authorization: `Bearer ${token}` },
        });
        const challenge = r.headers.get("www-authenticate") ?? "";
        // SPEC §Token service: a token without credentials is "evaluated as anonymous"; an
        // anonymous refusal is 401 with the challenge (docs/auth.md), not 403 DENIED.
        await assertErrorCode(r, 401, "UNAUTHORIZED");
        assert.match(challenge, /^Bearer /i);
        assert.ok(challenge.includes('scope="repository:team/app:pull"'), challenge);
      },
    );
  }

  await t.step("the clients authenticated the way the configuration says", async () => {
    const n = await authAttempts(s);
    assert.ok((n["basic/ok"] ?? 0) > 0, JSON.stringify(n));
    assert.ok((n["basic/failed"] ?? 0) > 0, JSON.stringify(n));
    if (setup.token) {
      // skopeo's registry calls carried tokens it bought at /token with the password.
      assert.ok((n["token/ok"] ?? 0) > 0, JSON.stringify(n));
    } else {
      assert.equal(n["token/ok"] ?? 0, 0, JSON.stringify(n));
    }
  });

  await t.step({
    name: "podman: login, pull, push with credentials; refusals",
    ignore: podmanSkip !== null,
    fn: async () => {
      const pm = await makePodman();
      try {
        await podmanSteps(s, pm, setup);
      } finally {
        await pm.cleanup();
      }
    },
  });
}

async function podmanOk(pm: Podman, args: string[], s: TestServer): Promise<Run> {
  const r = await pm.run(args);
  if (r.code !== 0) {
    assert.fail(
      `podman ${args.join(" ")} exited ${r.code}:\n${r.stderr.slice(-3000)}\n` +
        `--- server output (tail) ---\n${s.output().slice(-2000)}`,
    );
  }
  return r;
}

async function podmanSteps(s: TestServer, pm: Podman, setup: Setup): Promise<void> {
  const im = img();
  const anonRefused = setup.token ? ANON_REFUSED : UNAUTHORIZED;
  const host = `127.0.0.1:${s.port}`;
  const aliceAuth = pm.authfile("alice");
  const bobAuth = pm.authfile("bob");

  // Wrong password: login itself fails (it checks /v2/ with the credentials).
  const bad = await loginWith(pm, host, "alice", "not-the-password", pm.authfile("bad"));
  assertRefused(bad, "podman login with a wrong password", UNAUTHORIZED);

  for (const [creds, authfile] of [[ALICE, aliceAuth], [BOB, bobAuth]]) {
    const [user, pw] = creds.split(":");
    const r = await loginWith(pm, host, user, pw, authfile);
    assert.equal(r.code, 0, `podman login ${user}: ${r.stderr}`);
    assert.match(r.stdout, /Login Succeeded/);
  }

  // Anonymous pull: refused.
  const anon = await pm.run(["pull", "--tls-verify=false", `${host}/team/app:v1`]);
  assertRefused(anon, "podman anonymous pull", anonRefused);

  // bob pulls what alice pushed with skopeo; podman's image ID is the config digest.
  await podmanOk(
    pm,
    ["pull", "--tls-verify=false", "--authfile", bobAuth, `${host}/team/app:v1`],
    s,
  );
  const id = await podmanOk(
    pm,
    ["image", "inspect", "--format", "{{.Id}}", `${host}/team/app:v1`],
    s,
  );
  assert.equal(`sha256:${id.stdout.trim()}`, im.v1.config);

  // alice pushes an image podman imported from the layout (the host's platform of the index);
  // its blobs are not in team/app yet, so this is a real upload, not a reuse.
  const arch = Deno.build.arch === "aarch64" ? "arm64" : "amd64";
  const platform = JSON.parse(
    new TextDecoder().decode(await readBlob(im.layout, im.multi[arch])),
  );
  const imported = await podmanOk(pm, ["pull", "--arch", arch, oci(im.layout, "multi")], s);
  const importedId = imported.stdout.trim().split("\n").at(-1)!;
  assert.equal(`sha256:${importedId}`, platform.config.digest);
  assert.equal(await blobInTeamApp(s, platform.layers[0].digest), false);
  await podmanOk(pm, ["tag", importedId, `${host}/team/app:podman`], s);
  await podmanOk(
    pm,
    ["push", "--tls-verify=false", "--authfile", aliceAuth, `${host}/team/app:podman`],
    s,
  );
  assert.deepEqual(await tagsOf(s, "team/app"), ["podman", "v1"]);
  const cfg = await skopeoOk(
    [
      "inspect",
      "--config",
      "--raw",
      "--tls-verify=false",
      "--creds",
      BOB,
      ref(s, "team/app:podman"),
    ],
    s,
  );
  assert.equal(
    cfg.stdout,
    new TextDecoder().decode(await readBlob(im.layout, platform.config.digest)),
  );

  // bob pushing and alice pushing elsewhere are refused; nothing changes.
  await podmanOk(pm, ["tag", `${host}/team/app:v1`, `${host}/team/app:bob`], s);
  const bobPush = await pm.run(
    ["push", "--tls-verify=false", "--authfile", bobAuth, `${host}/team/app:bob`],
  );
  assertRefused(bobPush, "podman push as bob", DENIED);
  await podmanOk(pm, ["tag", `${host}/team/app:v1`, `${host}/other/repo:v1`], s);
  const elsewhere = await pm.run(
    ["push", "--tls-verify=false", "--authfile", aliceAuth, `${host}/other/repo:v1`],
  );
  assertRefused(elsewhere, "podman push as alice to other/repo", DENIED);
  assert.deepEqual(await tagsOf(s, "team/app"), ["podman", "v1"]);
  assert.equal(await tagsOf(s, "other/repo"), null);

  // Logging out drops the credentials; the next pull is anonymous and refused.
  await podmanOk(pm, ["logout", "--authfile", bobAuth, host], s);
  await podmanOk(pm, ["rmi", "-f", `${host}/team/app:v1`], s);
  const after = await pm.run(
    ["pull", "--tls-verify=false", "--authfile", bobAuth, `${host}/team/app:v1`],
  );
  assertRefused(after, "podman pull after logout", anonRefused);
}

async function loginWith(
  pm: Podman,
  host: string,
  user: string,
  password: string,
  authfile: string,
): Promise<Run> {
  // --password on the command line is fine here: the process is ours and short-lived.
  return await pm.run([
    "login",
    "--tls-verify=false",
    "--authfile",
    authfile,
    "--username",
    user,
    "--password",
    password,
    host,
  ], 30_000);
}
