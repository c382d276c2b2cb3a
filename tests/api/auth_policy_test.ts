// docs/auth.md §Authorization against real Wharf processes: a table of every action × identity
// (anonymous, Basic alice, Basic bob) under several global and repository policies, each row
// expecting the route's normal status when allowed, 401 UNAUTHORIZED with a Basic challenge
// when an anonymous caller is refused and 403 DENIED when an authenticated one is. Then the
// CEL variables one rule at a time, fail-closed evaluation, startup on a syntax error, bad
// credentials, policy-filtered catalog pages, mount source checks and trusted proxies.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertError, nextLink, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha256 } from "../helpers/bytes.ts";
import { distinctManifest, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { identityTables } from "../helpers/identities.ts";

type Kind = "anonymous" | "alice" | "bob";
const KINDS: Kind[] = ["anonymous", "alice", "bob"];

const PASSWORDS = { root: "root-pw-9f1c2e", alice: "alice-pw-3b7e01", bob: "bob-pw-5d2a77" };

/** `root` may do anything under every policy here; it only seeds content for the rows. */
const ROOT_RULE = 'has(identity.username) && identity.username == "root"';
const PROBES = 'request.action in ["healthz", "readyz", "get-api-version"]';
const PULL = ["get-manifest", "get-blob", "list-tags", "get-referrers"];
const PULL_CEL = JSON.stringify(PULL);

const basic = (user: string, pw: string) => `Basic ${btoa(`${user}:${pw}`)}`;
const ROOT = { authorization: basic("root", PASSWORDS.root) };

function headersOf(kind: Kind): Record<string, string> {
  return kind === "anonymous" ? {} : { authorization: basic(kind, PASSWORDS[kind]) };
}

// The table makes hundreds of Basic requests: the identities are hashed once (cheaply).
let identitiesToml: Promise<string> | null = null;
function identities(): Promise<string> {
  identitiesToml ??= identityTables(PASSWORDS);
  return identitiesToml;
}

const toml = (v: unknown) => JSON.stringify(v);

function policy(table: string, dflt: "allow" | "deny", rules: string[]): string {
  // TOML literal strings keep CEL's double quotes as they are.
  const lines = rules.map((r) => `  '${r}',`).join("\n");
  return `\n[${table}]\ndefault = "${dflt}"\nrules = [\n${lines}\n]\n`;
}

// ---------------------------------------------------------------------------------------------
// Seeding (as root) and the per-action requests

interface Image {
  tag: string;
  digest: string;
  body: Uint8Array;
}

/** Creates content as root; with no seeder (a policy root cannot pass) rows get dummy values. */
class Seeder {
  constructor(private readonly s: TestServer) {}

  async blob(ns: string): Promise<string> {
    const data = randomBytes(64);
    const digest = await sha256(data);
    const r = await req(this.s, `/v2/${ns}/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      body: data as BodyInit,
      headers: { ...ROOT, "content-type": "application/octet-stream" },
    });
    assert.equal(r.status, 201, `seed blob in ${ns}: ${r.status} ${await r.text()}`);
    return digest;
  }

  async image(ns: string, tag = `t-${crypto.randomUUID().slice(0, 8)}`): Promise<Image> {
    const m = await distinctManifest(ns);
    const r = await req(this.s, `/v2/${ns}/manifests/${tag}`, {
      method: "PUT",
      body: m.body as BodyInit,
      headers: { ...ROOT, "content-type": OCI_MANIFEST },
    });
    assert.equal(r.status, 201, `seed ${ns}:${tag}: ${r.status} ${await r.text()}`);
    return { tag, digest: m.digest, body: m.body };
  }

  async session(ns: string): Promise<string> {
    const r = await req(this.s, `/v2/${ns}/blobs/uploads/`, { method: "POST", headers: ROOT });
    await r.body?.cancel();
    assert.equal(r.status, 202, `seed session in ${ns}: ${r.status}`);
    const loc = new URL(r.headers.get("location")!, this.s.url);
    return loc.pathname.split("/").pop()!;
  }
}

interface Call {
  method: string;
  path: string;
  body?: Uint8Array;
  headers?: Record<string, string>;
}

interface ActionRow {
  /** the actions the gate checks; all must be allowed (a mount also passes start-upload) */
  checks: string[];
  namespaced: boolean;
  /** the route's answer when the policy lets it through */
  status: number;
  prepare(seed: Seeder | null, ns: string): Promise<Call>;
}

const dummyDigest = () => sha256(randomBytes(16));

const ACTIONS: Record<string, ActionRow> = {
  "get-api-version": {
    checks: ["get-api-version"],
    namespaced: false,
    status: 200,
    prepare: () => Promise.resolve({ method: "GET", path: "/v2/" }),
  },
  "list-catalog": {
    checks: ["list-catalog"],
    namespaced: false,
    status: 200,
    prepare: () => Promise.resolve({ method: "GET", path: "/v2/_catalog" }),
  },
  "healthz": {
    checks: ["healthz"],
    namespaced: false,
    status: 200,
    prepare: () => Promise.resolve({ method: "GET", path: "/healthz" }),
  },
  "readyz": {
    checks: ["readyz"],
    namespaced: false,
    status: 200,
    prepare: () => Promise.resolve({ method: "GET", path: "/readyz" }),
  },
  // No [auth.token_service] in these configs: once authorized, /token answers 404.
  "get-token": {
    checks: ["get-token"],
    namespaced: false,
    status: 404,
    prepare: () => Promise.resolve({ method: "GET", path: "/token" }),
  },
  "get-blob": {
    checks: ["get-blob"],
    namespaced: true,
    status: 200,
    prepare: async (seed, ns) => ({
      method: "GET",
      path: `/v2/${ns}/blobs/${seed ? await seed.blob(ns) : await dummyDigest()}`,
    }),
  },
  "delete-blob": {
    checks: ["delete-blob"],
    namespaced: true,
    status: 202,
    prepare: async (seed, ns) => ({
      method: "DELETE",
      path: `/v2/${ns}/blobs/${seed ? await seed.blob(ns) : await dummyDigest()}`,
    }),
  },
  "start-upload": {
    checks: ["start-upload"],
    namespaced: true,
    status: 202,
    prepare: (_seed, ns) => Promise.resolve({ method: "POST", path: `/v2/${ns}/blobs/uploads/` }),
  },
  "mount-blob": {
    checks: ["start-upload", "mount-blob"],
    namespaced: true,
    status: 201,
    prepare: async (seed, ns) => {
      // The blob is already held by the target, so an authorized mount needs no source read;
      // the source checks have their own test below.
      const digest = seed ? await seed.blob(ns) : await dummyDigest();
      return { method: "POST", path: `/v2/${ns}/blobs/uploads/?mount=${digest}&from=${ns}` };
    },
  },
  "get-upload": {
    checks: ["get-upload"],
    namespaced: true,
    status: 204,
    prepare: async (seed, ns) => ({
      method: "GET",
      path: `/v2/${ns}/blobs/uploads/${seed ? await seed.session(ns) : crypto.randomUUID()}`,
    }),
  },
  "update-upload": {
    checks: ["update-upload"],
    namespaced: true,
    status: 202,
    prepare: async (seed, ns) => ({
      method: "PATCH",
      path: `/v2/${ns}/blobs/uploads/${seed ? await seed.session(ns) : crypto.randomUUID()}`,
      body: new TextEncoder().encode("chunk"),
      headers: { "content-type": "application/octet-stream" },
    }),
  },
  "complete-upload": {
    checks: ["complete-upload"],
    namespaced: true,
    status: 201,
    prepare: async (seed, ns) => {
      const data = randomBytes(32);
      const uuid = seed ? await seed.session(ns) : crypto.randomUUID();
      return {
        method: "PUT",
        path: `/v2/${ns}/blobs/uploads/${uuid}?digest=${await sha256(data)}`,
        body: data,
        headers: { "content-type": "application/octet-stream" },
      };
    },
  },
  "cancel-upload": {
    checks: ["cancel-upload"],
    namespaced: true,
    status: 204,
    prepare: async (seed, ns) => ({
      method: "DELETE",
      path: `/v2/${ns}/blobs/uploads/${seed ? await seed.session(ns) : crypto.randomUUID()}`,
    }),
  },
  "get-manifest": {
    checks: ["get-manifest"],
    namespaced: true,
    status: 200,
    prepare: async (seed, ns) => ({
      method: "GET",
      path: `/v2/${ns}/manifests/${seed ? (await seed.image(ns)).tag : "latest"}`,
      headers: { accept: OCI_MANIFEST },
    }),
  },
  "put-manifest": {
    checks: ["put-manifest"],
    namespaced: true,
    status: 201,
    prepare: async (_seed, ns) => ({
      method: "PUT",
      path: `/v2/${ns}/manifests/p-${crypto.randomUUID().slice(0, 8)}`,
      body: (await distinctManifest(ns)).body,
      headers: { "content-type": OCI_MANIFEST },
    }),
  },
  "delete-manifest": {
    checks: ["delete-manifest"],
    namespaced: true,
    status: 202,
    prepare: async (seed, ns) => ({
      method: "DELETE",
      path: `/v2/${ns}/manifests/${seed ? (await seed.image(ns)).digest : await dummyDigest()}`,
    }),
  },
  "list-tags": {
    checks: ["list-tags"],
    namespaced: true,
    status: 200,
    prepare: async (seed, ns) => {
      if (seed) await seed.image(ns);
      return { method: "GET", path: `/v2/${ns}/tags/list` };
    },
  },
  "get-referrers": {
    checks: ["get-referrers"],
    namespaced: true,
    status: 200,
    prepare: async (seed, ns) => ({
      method: "GET",
      path: `/v2/${ns}/referrers/${seed ? (await seed.image(ns)).digest : await dummyDigest()}`,
    }),
  },
};

/** Every action routes/actions.ts names outside the extension endpoints. */
const ACTION_NAMES = Object.keys(ACTIONS);

function send(s: TestServer, c: Call, extra: Record<string, string> = {}): Promise<Response> {
  return req(s, c.path, {
    method: c.method,
    body: c.body as BodyInit | undefined,
    headers: { ...c.headers, ...extra },
  });
}

/** A refusal: anonymous → 401 UNAUTHORIZED with a Basic challenge; otherwise 403 DENIED. */
async function assertRefused(r: Response, kind: Kind | "root", what: string): Promise<void> {
  const text = await r.text();
  if (kind === "anonymous") {
    assert.equal(r.status, 401, `${what}: expected 401, got ${r.status} ${text}`);
    assert.match(r.headers.get("www-authenticate") ?? "", /^Basic realm="[^"]+"/, what);
    await assertError(new Response(text, { status: 401 }), 401, "UNAUTHORIZED");
  } else {
    assert.equal(r.status, 403, `${what}: expected 403, got ${r.status} ${text}`);
    assert.equal(r.headers.get("www-authenticate"), null, `${what}: 403 with a challenge`);
    await assertError(new Response(text, { status: 403 }), 403, "DENIED");
  }
}

async function assertAllowed(r: Response, status: number, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, `${what}: expected ${status}, got ${r.status} ${text}`);
}

/** Expects `status` when allowed, else the refusal shape for `kind`. */
async function expectOutcome(
  r: Response,
  kind: Kind,
  allowed: boolean,
  status: number,
  what: string,
): Promise<void> {
  if (allowed) await assertAllowed(r, status, what);
  else await assertRefused(r, kind, what);
}

type Oracle = (kind: Kind, action: string, ns: string | undefined) => boolean;

interface Scenario {
  name: string;
  config: string;
  /** namespaces the namespaced rows run against */
  namespaces: string[];
  /** whether root can seed (false for a policy that refuses everything) */
  seed: boolean;
  /** the expected decision, written independently of the server's evaluator */
  allow: Oracle;
}

async function runTable(t: Deno.TestContext, sc: Scenario): Promise<void> {
  await withServer({ config: sc.config }, async (s) => {
    const seed = sc.seed ? new Seeder(s) : null;
    for (const action of ACTION_NAMES) {
      const row = ACTIONS[action];
      for (const ns of row.namespaced ? sc.namespaces : [undefined]) {
        await t.step(`${sc.name}: ${action}${ns ? ` ${ns}` : ""}`, async () => {
          for (const kind of KINDS) {
            const allowed = row.checks.every((a) => sc.allow(kind, a, ns));
            const call = await row.prepare(seed, ns ?? "");
            const what = `${kind} ${call.method} ${call.path}`;
            await expectOutcome(
              await send(s, call, headersOf(kind)),
              kind,
              allowed,
              row.status,
              what,
            );
          }
        });
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The table under five policies

Deno.test({
  name: "policy table: every action × identity under global and repository policies",
  ...serverTestOpts,
  fn: async (t) => {
    const ids = await identities();
    const scenarios: Scenario[] = [
      {
        name: "allow, no rules",
        config: ids + policy("global.access_policy", "allow", []),
        namespaces: ["team/app"],
        seed: true,
        allow: () => true,
      },
      {
        name: "deny, no rules",
        config: ids + policy("global.access_policy", "deny", []),
        namespaces: ["team/app"],
        seed: false,
        allow: () => false,
      },
      {
        // alice pushes and pulls team/app only; bob pulls anything; probes for everyone.
        name: "deny, per-user grants",
        config: ids + policy("global.access_policy", "deny", [
          PROBES,
          ROOT_RULE,
          'has(identity.username) && identity.username == "alice" && request.namespace == "team/app"',
          `has(identity.username) && identity.username == "bob" && request.action in ${PULL_CEL}`,
          'has(identity.username) && identity.username == "bob" && request.action == "list-catalog"',
        ]),
        namespaces: ["team/app", "other/app"],
        seed: true,
        allow: (kind, action, ns) => {
          if (["healthz", "readyz", "get-api-version"].includes(action)) return true;
          if (kind === "alice") return ns === "team/app";
          if (kind === "bob") return PULL.includes(action) || action === "list-catalog";
          return false;
        },
      },
      {
        name: "allow, refusing rules",
        config: ids + policy("global.access_policy", "allow", [
          // deletes only by alice
          'request.action in ["delete-blob", "delete-manifest"] && !(has(identity.username) && identity.username == "alice")',
          // no anonymous writes
          '!has(identity.username) && request.method in ["POST", "PUT", "PATCH", "DELETE"]',
          // bob neither lists the catalog nor gets tokens
          'has(identity.username) && identity.username == "bob" && request.action in ["list-catalog", "get-token"]',
        ]),
        namespaces: ["team/app"],
        seed: true,
        allow: (kind, action) => {
          if (["delete-blob", "delete-manifest"].includes(action) && kind !== "alice") return false;
          const write = [
            "delete-blob",
            "delete-manifest",
            "start-upload",
            "mount-blob",
            "update-upload",
            "complete-upload",
            "cancel-upload",
            "put-manifest",
          ];
          if (kind === "anonymous" && write.includes(action)) return false;
          if (kind === "bob" && ["list-catalog", "get-token"].includes(action)) return false;
          return true;
        },
      },
      {
        // The global policy lets any Basic user do anything and anonymous pull anywhere; the
        // "team" repository narrows that (alice everything, bob pull, anonymous nothing) and
        // the "open" repository allows everything, which cannot widen the global policy.
        name: "repository and global",
        config: ids +
          policy("global.access_policy", "deny", [
            PROBES,
            ROOT_RULE,
            'has(identity.provider) && identity.provider == "basic"',
            `!has(identity.username) && request.action in ${PULL_CEL}`,
          ]) +
          policy('repository."team".access_policy', "deny", [
            ROOT_RULE,
            'has(identity.username) && identity.username == "alice"',
            `has(identity.username) && identity.username == "bob" && request.action in ${PULL_CEL}`,
          ]) +
          policy('repository."open".access_policy', "allow", []),
        namespaces: ["team/app", "open/app", "plain/app"],
        seed: true,
        allow: (kind, action, ns) => {
          const global = ["healthz", "readyz", "get-api-version"].includes(action) ||
            kind !== "anonymous" || PULL.includes(action);
          if (!global) return false;
          if (ns?.startsWith("team/")) {
            return kind === "alice" || (kind === "bob" && PULL.includes(action));
          }
          return true;
        },
      },
    ];
    for (const sc of scenarios) await runTable(t, sc);
  },
});

// ---------------------------------------------------------------------------------------------
// CEL variables, fail-closed evaluation, trusted proxies

Deno.test({
  name: "policy rules on each CEL variable (default deny, trusted proxy 127.0.0.1)",
  ...serverTestOpts,
  fn: async (t) => {
    const blobA = randomBytes(48);
    const digestA = await sha256(blobA);
    const config = (await identities()) +
      '\n[repository."cfg/deep"]\nimmutable_tags = false\n' +
      policy("global.access_policy", "deny", [
        PROBES,
        ROOT_RULE,
        'request.action == "get-manifest" && request.namespace == "f/method" && request.method == "HEAD"',
        'request.action == "list-tags" && request.namespace == "f/ns"',
        'request.action == "list-tags" && request.repository == "f-repo"',
        'request.action == "list-tags" && request.repository == "cfg/deep"',
        // has no has(): a digest reference has no tag, so this errors and must grant nothing
        'request.action == "get-manifest" && request.namespace == "f/tag" && request.tag.startsWith("v1")',
        `request.action == "get-blob" && request.namespace == "f/digest" && request.digest == "${digestA}"`,
        'request.action == "get-referrers" && has(identity.username)',
        'request.action == "list-catalog" && has(identity.provider) && identity.provider == "basic"',
        'request.action == "list-tags" && request.namespace == "f/ip" && request.client_ip == "203.0.113.7"',
        'request.action == "list-tags" && request.namespace == "f/peer" && request.client_ip == "127.0.0.1"',
        // errors for anonymous callers (no username): grants nothing to them
        'request.action == "list-tags" && request.namespace == "f/err" && identity.username != "mallory"',
        // yields 1 (truthy, not a bool) on f/nonbool: grants nothing. dyn() keeps both
        // branches one type, or the rule would be a type error on every request.
        'request.action == "list-tags" && request.namespace == "f/nonbool" ? dyn(1) : dyn(false)',
      ]);
    await withServer({ config, server: 'trusted_proxies = ["127.0.0.1/32"]' }, async (s) => {
      const seed = new Seeder(s);
      const tags = (ns: string, h: Record<string, string> = {}) =>
        req(s, `/v2/${ns}/tags/list`, { headers: h });
      const anon = "anonymous";

      await t.step("request.method: HEAD granted, GET of the same manifest refused", async () => {
        const img = await seed.image("f/method", "v1");
        const head = await req(s, `/v2/f/method/manifests/v1`, { method: "HEAD" });
        await assertAllowed(head, 200, "HEAD");
        assert.equal(head.headers.get("docker-content-digest"), img.digest);
        await assertRefused(await req(s, `/v2/f/method/manifests/v1`), anon, "GET");
      });

      await t.step("request.namespace: exact namespace only", async () => {
        for (const ns of ["f/ns", "f/ns2", "f/ns/sub"]) await seed.image(ns);
        await assertAllowed(await tags("f/ns"), 200, "f/ns");
        await assertRefused(await tags("f/ns2"), anon, "f/ns2");
        await assertRefused(await tags("f/ns/sub"), anon, "f/ns/sub");
      });

      await t.step("request.repository: implicit first segment and configured prefix", async () => {
        for (const ns of ["f-repo/a/b", "f-repo2/a", "cfg/deep/app", "cfg/other"]) {
          await seed.image(ns);
        }
        await assertAllowed(await tags("f-repo/a/b"), 200, "f-repo/a/b");
        await assertRefused(await tags("f-repo2/a"), anon, "f-repo2/a");
        await assertAllowed(await tags("cfg/deep/app"), 200, "cfg/deep/app");
        // implicit repository "cfg", not the configured "cfg/deep"
        await assertRefused(await tags("cfg/other"), anon, "cfg/other");
      });

      await t.step(
        "request.tag: v1* granted; other tags and digest references refused",
        async () => {
          const v1 = await seed.image("f/tag", "v1.2");
          const latest = await seed.image("f/tag", "latest");
          const get = (ref: string) =>
            req(s, `/v2/f/tag/manifests/${ref}`, { headers: { accept: OCI_MANIFEST } });
          const r = await get("v1.2");
          assert.equal(r.status, 200);
          assert.deepEqual(new Uint8Array(await r.arrayBuffer()), v1.body);
          await assertRefused(await get("latest"), anon, "tag latest");
          // the rule reads request.tag, absent for a digest: an error, which grants nothing
          await assertRefused(await get(v1.digest), anon, "v1 by digest");
          await assertRefused(await get(latest.digest), anon, "latest by digest");
        },
      );

      await t.step("request.digest: only the named blob", async () => {
        const r0 = await req(s, `/v2/f/digest/blobs/uploads/?digest=${digestA}`, {
          method: "POST",
          body: blobA as BodyInit,
          headers: { ...ROOT, "content-type": "application/octet-stream" },
        });
        assert.equal(r0.status, 201);
        await r0.body?.cancel();
        const other = await seed.blob("f/digest");
        const r = await req(s, `/v2/f/digest/blobs/${digestA}`);
        assert.equal(r.status, 200);
        assert.deepEqual(new Uint8Array(await r.arrayBuffer()), blobA);
        await assertRefused(await req(s, `/v2/f/digest/blobs/${other}`), anon, "other blob");
      });

      await t.step("has(identity.username): named callers only", async () => {
        const img = await seed.image("f/refs");
        const path = `/v2/f/refs/referrers/${img.digest}`;
        await assertRefused(await req(s, path), anon, "anonymous referrers");
        for (const kind of ["alice", "bob"] as const) {
          const r = await req(s, path, { headers: headersOf(kind) });
          assert.equal(r.status, 200, kind);
          assert.equal((await r.json()).manifests.length, 0);
        }
      });

      await t.step('identity.provider == "basic": Basic users list the catalog', async () => {
        await assertRefused(await req(s, "/v2/_catalog"), anon, "anonymous catalog");
        const r = await req(s, "/v2/_catalog", { headers: headersOf("alice") });
        assert.equal(r.status, 200);
        assert.ok(Array.isArray((await r.json()).repositories));
      });

      await t.step("request.client_ip: X-Forwarded-For honoured from a trusted peer", async () => {
        await seed.image("f/ip");
        await seed.image("f/peer");
        const xff = (v: string) => ({ "x-forwarded-for": v });
        await assertRefused(await tags("f/ip"), anon, "no XFF");
        await assertAllowed(await tags("f/ip", xff("203.0.113.7")), 200, "XFF client");
        // right to left: the trusted 127.0.0.1 hop is skipped, the client behind it is used
        await assertAllowed(await tags("f/ip", xff("203.0.113.7, 127.0.0.1")), 200, "chain");
        // the nearest untrusted hop wins: a client cannot prepend its way in
        await assertRefused(await tags("f/ip", xff("203.0.113.7, 198.51.100.9")), anon, "2");
        await assertRefused(await tags("f/ip", xff("not-an-ip")), anon, "garbage XFF");
        await assertAllowed(await tags("f/peer"), 200, "socket peer without XFF");
        await assertRefused(await tags("f/peer", xff("198.51.100.9")), anon, "XFF replaces");
      });

      await t.step(
        "a rule that errors grants nothing; the same rule grants named users",
        async () => {
          await seed.image("f/err");
          await assertRefused(await tags("f/err"), anon, "anonymous (error)");
          await assertAllowed(await tags("f/err", headersOf("alice")), 200, "alice");
        },
      );

      await t.step("a non-bool rule grants nothing", async () => {
        await seed.image("f/nonbool");
        await assertRefused(await tags("f/nonbool"), anon, "anonymous");
        await assertRefused(await tags("f/nonbool", headersOf("alice")), "alice", "alice");
      });
    });
  },
});

Deno.test({
  name: "default allow: erroring and non-bool rules refuse; untrusted X-Forwarded-For ignored",
  ...serverTestOpts,
  fn: async (t) => {
    const config = (await identities()) + policy("global.access_policy", "allow", [
      // anonymous on g/err: true && error → error → refuses; named callers: false
      'has(request.namespace) && request.namespace == "g/err" && identity.username == "mallory"',
      // a string, not a bool, on g/nonbool only: refuses there
      'has(request.namespace) && request.namespace == "g/nonbool" ? dyn("refuse") : dyn(false)',
      'request.client_ip == "203.0.113.7"',
      'has(request.namespace) && request.namespace == "g/local" && request.client_ip == "127.0.0.1"',
    ]);
    // 127.0.0.1 is not a trusted proxy here
    await withServer({ config, server: 'trusted_proxies = ["10.0.0.0/8"]' }, async (s) => {
      const seed = new Seeder(s);
      const tags = (ns: string, h: Record<string, string> = {}) =>
        req(s, `/v2/${ns}/tags/list`, { headers: h });
      // g/nonbool and g/local refuse root too, so they stay empty: an allowed request there
      // would answer 404, not the refusals expected below.
      for (const ns of ["g/err", "g/ok"]) await seed.image(ns);

      await t.step("erroring rule: anonymous refused (401), alice allowed", async () => {
        await assertRefused(await tags("g/err"), "anonymous", "anonymous g/err");
        await assertAllowed(await tags("g/err", headersOf("alice")), 200, "alice g/err");
        await assertAllowed(await tags("g/ok"), 200, "anonymous g/ok");
        // the short-circuit leaves namespaces without the error alone, probes included
        await assertAllowed(await req(s, "/healthz"), 200, "healthz");
      });

      await t.step("non-bool rule: refused for everyone", async () => {
        await assertRefused(await tags("g/nonbool"), "anonymous", "anonymous");
        await assertRefused(await tags("g/nonbool", headersOf("alice")), "alice", "alice");
        await assertRefused(await tags("g/nonbool", headersOf("bob")), "bob", "bob");
        await assertRefused(await tags("g/nonbool", ROOT), "root", "root");
      });

      await t.step("X-Forwarded-For from an untrusted peer is ignored", async () => {
        const h = { "x-forwarded-for": "203.0.113.7" };
        await assertAllowed(await tags("g/ok", h), 200, "spoofed XFF");
        await assertAllowed(await req(s, "/v2/", { headers: h }), 200, "spoofed XFF /v2/");
        // the socket peer is what the rule sees, XFF or not
        await assertRefused(await tags("g/local"), "anonymous", "peer 127.0.0.1");
        await assertRefused(
          await tags("g/local", { "x-forwarded-for": "198.51.100.9" }),
          "anonymous",
          "peer 127.0.0.1 with XFF",
        );
      });
    });
  },
});

// ---------------------------------------------------------------------------------------------
// Bad credentials, startup on a CEL syntax error

Deno.test({
  name: "bad credentials are 401 even when the policy allows everything",
  ...serverTestOpts,
  fn: async (t) => {
    const config = (await identities()) + policy("global.access_policy", "allow", []);
    await withServer({ config }, async (s) => {
      const cases: [string, string][] = [
        ["wrong password", basic("alice", "not-alices-password")],
        ["another user's password", basic("alice", PASSWORDS.bob)],
        ["unknown user", basic("carol", PASSWORDS.alice)],
        ["empty password", basic("alice", "")],
        ["username case differs", basic("Alice", PASSWORDS.alice)],
      ];
      for (const [what, authorization] of cases) {
        await t.step(what, async () => {
          for (const path of ["/v2/", "/v2/team/app/tags/list", "/healthz"]) {
            await assertRefused(
              await req(s, path, { headers: { authorization } }),
              "anonymous",
              path,
            );
          }
        });
      }
      await t.step("the right password still works, anonymous too", async () => {
        await assertAllowed(await req(s, "/v2/", { headers: headersOf("alice") }), 200, "alice");
        await assertAllowed(await req(s, "/v2/"), 200, "anonymous");
      });
    });
  },
});

/** Runs `main.ts serve` on a config expected to fail; returns exit code and output. */
async function serveExpectingFailure(configBody: string): Promise<{ code: number; out: string }> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-test-" });
  try {
    const path = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      path,
      `[server]\nbind_address = "127.0.0.1"\nport = 0\n\n[blob_store.fs]\nroot_dir = ${
        toml(join(dir, "blobs"))
      }\n\n[metadata_store]\npath = ${toml(join(dir, "metadata.kv"))}\n${configBody}`,
    );
    const child = wharfCommand(["serve", "-c", path], {
      stdout: "piped",
      stderr: "piped",
      env: { RUST_BACKTRACE: "0", NO_COLOR: "1" },
    }).spawn();
    // a server that starts anyway would run forever: bound it
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const o = await child.output();
    clearTimeout(timer);
    const dec = new TextDecoder();
    return { code: o.code, out: dec.decode(o.stdout) + dec.decode(o.stderr) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a CEL syntax error stops startup naming the policy and the rule", async () => {
  const bad = 'request.action == "healthz" &&';
  const g = await serveExpectingFailure(policy("global.access_policy", "deny", [PROBES, bad]));
  assert.notEqual(g.code, 0, g.out);
  assert.doesNotMatch(g.out, /listening on/, g.out);
  assert.match(g.out, /global\.access_policy/, g.out);
  assert.ok(g.out.includes(bad), `output does not name the rule: ${g.out}`);

  const bad2 = "request.namespace.startsWith(";
  const r = await serveExpectingFailure(
    policy('repository."team".access_policy', "allow", [bad2]),
  );
  assert.notEqual(r.code, 0, r.out);
  assert.doesNotMatch(r.out, /listening on/, r.out);
  assert.match(r.out, /repository\."team"\.access_policy/, r.out);
  assert.ok(r.out.includes(bad2), `output does not name the rule: ${r.out}`);
});

// ---------------------------------------------------------------------------------------------
// Catalog filtering and mount source checks

Deno.test({
  name: "catalog pages hold n admitted names; mount checks mount-blob and the source's get-blob",
  ...serverTestOpts,
  fn: async (t) => {
    const config = (await identities()) + policy("global.access_policy", "deny", [
      PROBES,
      ROOT_RULE,
      'has(identity.username) && request.action == "list-catalog"',
      'has(identity.username) && identity.username == "alice" && request.action == "list-tags" && request.namespace.startsWith("cat/") && request.namespace.endsWith("-ok")',
      // mount: alice may upload and mount into mnt/dst and read mnt/readable, never mnt/secret
      'has(identity.username) && identity.username == "alice" && request.namespace == "mnt/dst" && request.action in ["start-upload", "mount-blob", "get-upload", "complete-upload"]',
      'has(identity.username) && identity.username == "alice" && request.namespace == "mnt/readable" && request.action == "get-blob"',
      // bob and anonymous may upload to mnt/dst, but not mount
      'request.namespace == "mnt/dst" && request.action == "start-upload" && !(has(identity.username) && identity.username == "alice")',
    ]) +
      // the repository policy hides cat/f-ok from alice although the global policy admits it
      policy('repository."cat".access_policy', "allow", [
        'request.namespace == "cat/f-ok" && has(identity.username) && identity.username == "alice"',
      ]);
    await withServer({ config }, async (s) => {
      const seed = new Seeder(s);
      const all = [
        "cat/a",
        "cat/b-ok",
        "cat/c",
        "cat/d",
        "cat/e-ok",
        "cat/f-ok",
        "cat/g",
        "cat/h",
        "cat/i",
        "cat/j-ok",
        "cat/k-ok",
        "cat/l",
        "cat/m-ok-not",
        "cat/n-ok",
      ];
      // pushed in reverse so storage order is not the listing order
      for (const ns of [...all].reverse()) await seed.image(ns);
      const admitted = all.filter((n) => n.endsWith("-ok") && n !== "cat/f-ok").sort();
      assert.equal(admitted.length, 5);

      const walk = async (who: Kind | "root", n: number) => {
        const h = who === "root" ? ROOT : headersOf(who);
        const pages: string[][] = [];
        let next: string | null = `/v2/_catalog?n=${n}`;
        while (next !== null && pages.length < 50) {
          const r: Response = await req(s, next, { headers: h });
          assert.equal(r.status, 200, `${who} ${next}`);
          next = nextLink(r);
          pages.push((await r.json()).repositories);
        }
        return pages;
      };

      await t.step(
        "alice, n=2: pages of 2 admitted names while 2 remain, Link to the end",
        async () => {
          const pages = await walk("alice", 2);
          assert.deepEqual(pages, [
            [admitted[0], admitted[1]],
            [admitted[2], admitted[3]],
            [admitted[4]],
          ]);
        },
      );

      await t.step("alice, n=1 and unpaginated: the same names, nothing else", async () => {
        assert.deepEqual(await walk("alice", 1), admitted.map((n) => [n]));
        const r = await req(s, "/v2/_catalog", { headers: headersOf("alice") });
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("link"), null);
        assert.deepEqual((await r.json()).repositories, admitted);
      });

      await t.step("the Link of a filtered page carries n and the last admitted name", async () => {
        const r = await req(s, "/v2/_catalog?n=2", { headers: headersOf("alice") });
        const link = nextLink(r);
        assert.ok(link);
        const u = new URL(link, s.url);
        assert.equal(u.pathname, "/v2/_catalog");
        assert.equal(u.searchParams.get("n"), "2");
        assert.equal(u.searchParams.get("last"), admitted[1]);
        await r.body?.cancel();
      });

      await t.step("the repository policy's refusal holds for the tag list too", async () => {
        const r = await req(s, "/v2/cat/f-ok/tags/list", { headers: headersOf("alice") });
        await assertRefused(r, "alice", "alice cat/f-ok");
      });

      await t.step("bob may list the catalog but no namespace's tags: empty", async () => {
        assert.deepEqual(await walk("bob", 2), [[]]);
      });

      await t.step("root sees every namespace", async () => {
        const names = (await walk("root", 2)).flat();
        for (const ns of all) assert.ok(names.includes(ns), ns);
      });

      await t.step("anonymous may not list the catalog: 401", async () => {
        await assertRefused(await req(s, "/v2/_catalog?n=2"), "anonymous", "anonymous");
      });

      const mount = (who: Kind, digest: string, from?: string) => {
        const q = new URLSearchParams({ mount: digest });
        if (from !== undefined) q.set("from", from);
        return req(s, `/v2/mnt/dst/blobs/uploads/?${q}`, {
          method: "POST",
          headers: headersOf(who),
        });
      };
      const rootHas = async (ns: string, digest: string) => {
        const r = await req(s, `/v2/${ns}/blobs/${digest}`, { method: "HEAD", headers: ROOT });
        await r.body?.cancel();
        return r.status === 200;
      };
      const assertSession = async (r: Response, what: string) => {
        assert.equal(r.status, 202, `${what}: ${r.status} ${await r.clone().text()}`);
        assert.match(
          new URL(r.headers.get("location")!, s.url).pathname,
          /^\/v2\/mnt\/dst\/blobs\/uploads\/[^/]+$/,
          what,
        );
        await r.body?.cancel();
      };

      await t.step("mount allowed and source readable: 201, blob in the target", async () => {
        const d = await seed.blob("mnt/readable");
        const r = await mount("alice", d, "mnt/readable");
        assert.equal(r.status, 201, `${r.status} ${await r.clone().text()}`);
        assert.equal(r.headers.get("docker-content-digest"), d);
        assert.equal(
          new URL(r.headers.get("location")!, s.url).pathname,
          `/v2/mnt/dst/blobs/${d}`,
        );
        await r.body?.cancel();
        assert.ok(await rootHas("mnt/dst", d));
      });

      await t.step("source the caller cannot get-blob: 202 upload session, no mount", async () => {
        const d = await seed.blob("mnt/secret");
        await assertSession(await mount("alice", d, "mnt/secret"), "from secret");
        assert.equal(await rootHas("mnt/dst", d), false, "blob was mounted from a secret source");
        // without from, the only holder is unreadable too
        await assertSession(await mount("alice", d), "no from");
        assert.equal(await rootHas("mnt/dst", d), false);
      });

      await t.step("without from, a readable holder among unreadable ones is used", async () => {
        const data = randomBytes(40);
        const d = await sha256(data);
        for (const ns of ["mnt/secret", "mnt/readable"]) {
          const r = await req(s, `/v2/${ns}/blobs/uploads/?digest=${d}`, {
            method: "POST",
            body: data as BodyInit,
            headers: { ...ROOT, "content-type": "application/octet-stream" },
          });
          assert.equal(r.status, 201);
          await r.body?.cancel();
        }
        const r = await mount("alice", d);
        assert.equal(r.status, 201, `${r.status} ${await r.clone().text()}`);
        await r.body?.cancel();
        assert.ok(await rootHas("mnt/dst", d));
      });

      await t.step("mount-blob refused: 403 for bob, 401 for anonymous", async () => {
        const d = await seed.blob("mnt/readable");
        await assertRefused(await mount("bob", d, "mnt/readable"), "bob", "bob mount");
        await assertRefused(await mount("anonymous", d, "mnt/readable"), "anonymous", "anon");
        assert.equal(await rootHas("mnt/dst", d), false);
        // the refusal is the mount's: a plain upload is allowed to both
        for (const who of ["bob", "anonymous"] as const) {
          await assertSession(
            await req(s, "/v2/mnt/dst/blobs/uploads/", { method: "POST", headers: headersOf(who) }),
            `${who} plain upload`,
          );
        }
      });
    });
  },
});
