// SPEC §Extension endpoints, §Resources: the repositories, namespaces, revisions and uploads
// listings and the UI config; visibility per caller (global and repository policies, two Basic
// identities and anonymous), every field and omission rule, the 404 rules and `/_ext/` gone.
import assert from "node:assert/strict";
import { assertError, req, serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import {
  descOf,
  distinctManifest,
  imageIndex,
  imageManifest,
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  putManifestOk,
} from "../helpers/oci_content.ts";
import { pushImage, type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const SIG = "application/vnd.example.signature.v1+json";
const basic = (u: string) => ({ authorization: `Basic ${btoa(`${u}:pw-${u}`)}` });
const ALICE = basic("alice");
const BOB = basic("bob");

async function config(): Promise<string> {
  return `
[ui]
name = "Test Harbor"

[ui.oidc]
provider = "corp"
client_id = "wharf-ui"

[auth.oidc.corp]
issuer = "https://id.example.com"
jwks_uri = "https://id.example.com/keys"

[auth.identity.alice]
username = "alice"
password = "${await hashPassword("pw-alice")}"

[auth.identity.bob]
username = "bob"
password = "${await hashPassword("pw-bob")}"

[global.access_policy]
default = "allow"
rules = [
  'has(identity.username) && identity.username == "bob" && request.action == "list-tags" && request.repository == "team"',
  'has(identity.username) && identity.username == "alice" && request.action == "list-tags" && request.namespace == "lib/hidden"',
  'has(identity.username) && identity.username == "bob" && request.action == "list-uploads"',
]

[repository."team"]
immutable_tags = true
immutable_tags_exclusions = ["latest", "dev-.*"]

[repository."team".access_policy]
default = "allow"
rules = [
  'request.action == "list-tags" && request.namespace == "team/secret" && !(has(identity.username) && identity.username == "alice")',
]
`;
}

async function getJson(
  s: TestServer,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ r: Response; body: Record<string, unknown> }> {
  const r = await req(s, path, { headers });
  const text = await r.text();
  assert.equal(r.status, 200, `${path}: ${r.status} ${text}`);
  assert.equal(r.headers.get("content-type"), "application/json");
  return { r, body: JSON.parse(text) };
}

function isoRecent(v: unknown, since: number): void {
  assert.equal(typeof v, "string");
  assert.match(v as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  const t = Date.parse(v as string);
  assert.ok(t >= since - 1000 && t <= Date.now() + 1000, `${v} not recent`);
}

interface Fixture {
  since: number;
  upload: string;
  child1: string;
  child2: string;
  index: string;
  referrer: string;
}

async function populate(s: TestServer): Promise<Fixture> {
  const since = Date.now();
  await pushImage(s.url, "team/app", "v1");
  await pushImage(s.url, "team/app", "latest");
  await pushImage(s.url, "team/secret", "s1");
  // team is immutable; a dev-* tag is excluded, so its manifest may be deleted (issue 35)
  const gone = await pushImage(s.url, "team/empty", "dev-tmp");
  const del = await req(s, `/v2/team/empty/manifests/${gone.digest}`, { method: "DELETE" });
  assert.equal(del.status, 202);
  await pushImage(s.url, "lib/x", "1.0");
  await pushImage(s.url, "lib/hidden", "h");
  await pushImage(s.url, "solo", "a");

  // An upload session in progress with 5 committed bytes.
  const start = await req(s, "/v2/team/app/blobs/uploads/", { method: "POST" });
  assert.equal(start.status, 202);
  const loc = start.headers.get("location")!;
  const patch = await req(s, loc, {
    method: "PATCH",
    body: new TextEncoder().encode("hello"),
    headers: { "content-type": "application/octet-stream" },
  });
  assert.equal(patch.status, 202);
  const upload = loc.split("/").pop()!.split("?")[0];

  // lib/multi: an index over two children (one without a platform), tagged, and a referrer.
  const c1 = await distinctManifest("child1");
  const c2 = await distinctManifest("child2");
  await putManifestOk(s, "lib/multi", c1.digest, c1.body);
  await putManifestOk(s, "lib/multi", c2.digest, c2.body);
  const d1 = {
    ...(await descOf(OCI_MANIFEST, c1.body)),
    platform: { os: "linux", architecture: "amd64" },
  };
  const d2 = await descOf(OCI_MANIFEST, c2.body);
  const idx = imageIndex([d1, d2]);
  await putManifestOk(s, "lib/multi", "multi", idx, OCI_INDEX);
  const empty = new TextEncoder().encode("{}");
  const emptyDesc = { mediaType: OCI_EMPTY, digest: await sha256(empty), size: 2 };
  const ref = imageManifest(emptyDesc, [emptyDesc], {
    artifactType: SIG,
    subject: await descOf(OCI_MANIFEST, c1.body),
  });
  const refDigest = await sha256(ref);
  await putManifestOk(s, "lib/multi", refDigest, ref);
  return {
    since,
    upload,
    child1: c1.digest,
    child2: c2.digest,
    index: await sha256(idx),
    referrer: refDigest,
  };
}

Deno.test("SPEC §Extension endpoints: listings", serverTestOpts, async (t) => {
  const cfg = await config();
  await withServer({ config: cfg }, async (s) => {
    const fx = await populate(s);

    await t.step("repositories: per-caller visibility and namespace_count", async () => {
      const summary = (name: string, count: number, immutable = false) => ({
        name,
        namespace_count: count,
        pull_through_cache: false,
        upstream_urls: [],
        immutable_tags: immutable,
      });
      // team/empty holds no content: never counted.
      const anon = await getJson(s, "/v2/_svc/repositories/list");
      assert.deepEqual(anon.body, {
        repositories: [summary("lib", 3), summary("solo", 1), summary("team", 1, true)],
      });
      const alice = await getJson(s, "/v2/_svc/repositories/list", ALICE);
      assert.deepEqual(alice.body, {
        repositories: [summary("lib", 2), summary("solo", 1), summary("team", 2, true)],
      });
      const bob = await getJson(s, "/v2/_svc/repositories/list", BOB);
      assert.deepEqual(bob.body, { repositories: [summary("lib", 3), summary("solo", 1)] });
    });

    await t.step("repositories: HEAD answers headers only; no n/last paging", async () => {
      const r = await req(s, "/v2/_svc/repositories/list", { method: "HEAD" });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.ok(Number(r.headers.get("content-length")) > 0);
      assert.equal(await r.text(), "");
      const paged = await getJson(s, "/v2/_svc/repositories/list?n=1");
      assert.equal((paged.body.repositories as unknown[]).length, 3);
      assert.equal(paged.r.headers.get("link"), null);
    });

    await t.step("namespaces: counts, settings, emptied namespace with zero counts", async () => {
      const { body } = await getJson(s, "/v2/_svc/namespaces/list?repository=team", ALICE);
      assert.deepEqual(body, {
        repository: "team",
        namespaces: [
          { name: "team/app", tag_count: 2, manifest_count: 2, upload_count: 1 },
          { name: "team/empty", tag_count: 0, manifest_count: 0, upload_count: 0 },
          { name: "team/secret", tag_count: 1, manifest_count: 1, upload_count: 0 },
        ],
        pull_through_cache: false,
        upstream_urls: [],
        immutable_tags: true,
        immutable_tags_exclusions: ["latest", "dev-.*"],
      });
      const anon = await getJson(s, "/v2/_svc/namespaces/list?repository=team");
      const names = (anon.body.namespaces as { name: string }[]).map((n) => n.name);
      assert.deepEqual(names, ["team/app", "team/empty"], "repository policy hides team/secret");
    });

    await t.step("namespaces: implicit repository carries the global settings", async () => {
      const { body } = await getJson(s, "/v2/_svc/namespaces/list?repository=lib", ALICE);
      assert.deepEqual(body, {
        repository: "lib",
        namespaces: [
          { name: "lib/multi", tag_count: 1, manifest_count: 4, upload_count: 0 },
          { name: "lib/x", tag_count: 1, manifest_count: 1, upload_count: 0 },
        ],
        pull_through_cache: false,
        upstream_urls: [],
        immutable_tags: false,
        immutable_tags_exclusions: [],
      });
      const solo = await getJson(s, "/v2/_svc/namespaces/list?repository=solo");
      assert.deepEqual(
        (solo.body.namespaces as unknown[])[0],
        { name: "solo", tag_count: 1, manifest_count: 1, upload_count: 0 },
      );
    });

    await t.step("namespaces: hidden, unconfigured, missing or malformed → 404", async () => {
      await assertError(
        await req(s, "/v2/_svc/namespaces/list?repository=team", { headers: BOB }),
        404,
        "NAME_UNKNOWN",
      );
      for (
        const q of [
          "",
          "?repository=",
          "?repository=nope",
          "?repository=Team",
          "?repository=team%2F%2Fx",
          "?repository=team&repository=lib",
          "?repository=team/app",
          `?repository=${"a".repeat(300)}`,
        ]
      ) {
        await assertError(await req(s, `/v2/_svc/namespaces/list${q}`), 404, "NAME_UNKNOWN");
      }
    });

    await t.step("revisions: tags, parents, referrers, pushed_at; referrer is a leaf", async () => {
      const { body } = await getJson(s, "/v2/lib/multi/_svc/revisions/list");
      assert.equal(body.name, "lib/multi");
      const rows = body.manifests as Record<string, unknown>[];
      assert.deepEqual(rows.map((r) => r.digest), [...rows.map((r) => r.digest)].sort());
      const by = new Map(rows.map((r) => [r.digest as string, r]));
      assert.equal(by.size, 4);
      const c1 = by.get(fx.child1)!;
      isoRecent(c1.pushed_at, fx.since);
      // size and platform (docs/api.md#revisions) are tested in svc_image_extras_test.ts
      assert.equal(typeof c1.size, "number");
      assert.deepEqual({ ...c1, pushed_at: undefined, size: undefined }, {
        size: undefined,
        digest: fx.child1,
        tags: [],
        parents: [{
          digest: fx.index,
          tags: ["multi"],
          platform: { os: "linux", architecture: "amd64" },
        }],
        referrers: [{ digest: fx.referrer, artifactType: SIG }],
        pushed_at: undefined,
      });
      const c2 = by.get(fx.child2)!;
      assert.deepEqual(c2.parents, [{
        digest: fx.index,
        tags: ["multi"],
        platform: { os: "unknown", architecture: "unknown" },
      }]);
      assert.equal("referrers" in c2, false, "omitted when empty");
      const idx = by.get(fx.index)!;
      assert.deepEqual(Object.keys(idx).sort(), ["digest", "pushed_at", "size", "tags"]);
      assert.deepEqual(idx.tags, ["multi"]);
      isoRecent(idx.pushed_at, fx.since);
      const ref = by.get(fx.referrer)!;
      assert.deepEqual(
        { ...ref, size: undefined },
        { digest: fx.referrer, tags: [], size: undefined },
        "a referrer: no timestamps",
      );
      for (const r of rows) assert.equal("last_pulled_at" in r, false, "update_pull_time off");
    });

    await t.step("revisions: a namespace without content is 404 NAME_UNKNOWN", async () => {
      for (const ns of ["lib/none", "team/empty"]) {
        await assertError(await req(s, `/v2/${ns}/_svc/revisions/list`), 404, "NAME_UNKNOWN");
      }
      await assertError(await req(s, "/v2/A/_svc/revisions/list"), 400, "NAME_INVALID");
    });

    await t.step("uploads: uuid, committed size, started_at; empty list elsewhere", async () => {
      const { body } = await getJson(s, "/v2/team/app/_svc/uploads/list", ALICE);
      assert.equal(body.name, "team/app");
      const ups = body.uploads as Record<string, unknown>[];
      assert.equal(ups.length, 1);
      assert.deepEqual(Object.keys(ups[0]).sort(), ["size", "started_at", "uuid"]);
      assert.equal(ups[0].uuid, fx.upload);
      assert.equal(ups[0].size, 5);
      isoRecent(ups[0].started_at, fx.since);
      assert.deepEqual((await getJson(s, "/v2/lib/x/_svc/uploads/list")).body, {
        name: "lib/x",
        uploads: [],
      });
      await assertError(
        await req(s, "/v2/team/app/_svc/uploads/list", { headers: BOB }),
        403,
        "DENIED",
      );
    });

    await t.step("ui config: name and sign-in settings", async () => {
      assert.deepEqual((await getJson(s, "/v2/_svc/ui/config")).body, {
        name: "Test Harbor",
        oidc: {
          issuer: "https://id.example.com",
          client_id: "wharf-ui",
          scopes: "openid profile email",
        },
      });
    });

    await t.step("other methods are 400 UNSUPPORTED; the /_ext/ prefix is not served", async () => {
      const r = await req(s, "/v2/_svc/repositories/list", { method: "POST" });
      await assertError(r, 400, "UNSUPPORTED");
      const d = await req(s, "/v2/lib/x/_svc/revisions/list", { method: "DELETE" });
      await assertError(d, 400, "UNSUPPORTED");
      for (const p of ["/_ext/repositories/list", "/_ext/ui/config", "/_ext/lib/x/revisions"]) {
        const e = await req(s, p);
        assert.equal(e.status, 404, p);
        await e.body?.cancel();
      }
    });
  });
});
