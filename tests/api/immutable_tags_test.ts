// Immutable tags (SPEC §Errors DENIED 409; DESIGN "Immutable tags"): a push that would move an
// existing tag to another digest is 409 DENIED; a first push and a same-digest re-push succeed;
// exclusions are full-match regexes; global and per-repository settings. SPEC forbids only moving
// a tag, so DELETE by tag of an immutable tag is allowed and the name can then be pushed afresh.
import assert from "node:assert/strict";
import { sha256Hex, type TestServer, withServer } from "../helpers/server.ts";

// The server process's log pump runs across steps, so per-step op/resource sanitizers would
// report its reads; the server itself is stopped and awaited by withServer.
const opts = { sanitizeOps: false, sanitizeResources: false };

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const enc = new TextEncoder();

function req(s: TestServer, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${s.url}${path}`, { ...init, signal: AbortSignal.timeout(20_000) });
}

async function assertError(r: Response, status: number, code: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, `expected ${status} ${code}, got ${r.status}: ${text}`);
  const body = JSON.parse(text);
  assert.ok(Array.isArray(body.errors) && body.errors.length > 0, text);
  const e = body.errors[0];
  assert.equal(e.code, code, text);
  assert.equal(typeof e.message, "string");
  assert.equal(typeof e.detail, "string");
}

/** A distinct manifest body (blobs left missing, which the default config allows). */
async function manifest(label: string): Promise<{ body: Uint8Array; digest: string }> {
  const cfg = enc.encode(JSON.stringify({ label, nonce: crypto.randomUUID() }));
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: `sha256:${await sha256Hex(cfg)}`,
      size: cfg.length,
    },
    layers: [],
  }));
  return { body, digest: `sha256:${await sha256Hex(body)}` };
}

function put(
  s: TestServer,
  ns: string,
  ref: string,
  body: Uint8Array,
  headers: Record<string, string> = {},
): Promise<Response> {
  return req(s, `/v2/${ns}/manifests/${ref}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": OCI_MANIFEST, ...headers },
  });
}

async function expectStatus(r: Response, status: number, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, `${what}: ${r.status} ${text}`);
}

async function tagDigest(s: TestServer, ns: string, tag: string): Promise<string | null> {
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, { method: "HEAD" });
  await r.body?.cancel();
  if (r.status === 404) return null;
  assert.equal(r.status, 200, `HEAD ${ns}:${tag}`);
  return r.headers.get("docker-content-digest");
}

/** Asserts `tag` in `ns` is immutable: first push ok, same digest ok, moving it 409 DENIED. */
async function assertImmutable(s: TestServer, ns: string, tag: string): Promise<void> {
  const m1 = await manifest(`${ns}:${tag} 1`);
  const m2 = await manifest(`${ns}:${tag} 2`);
  await expectStatus(await put(s, ns, tag, m1.body), 201, `first push ${ns}:${tag}`);
  await expectStatus(await put(s, ns, tag, m1.body), 201, `same-digest re-push ${ns}:${tag}`);
  await assertError(await put(s, ns, tag, m2.body), 409, "DENIED");
  assert.equal(await tagDigest(s, ns, tag), m1.digest, `${ns}:${tag} moved`);
}

/** Asserts `tag` in `ns` is mutable: a second push moves it. */
async function assertMutable(s: TestServer, ns: string, tag: string): Promise<void> {
  const m1 = await manifest(`${ns}:${tag} 1`);
  const m2 = await manifest(`${ns}:${tag} 2`);
  await expectStatus(await put(s, ns, tag, m1.body), 201, `first push ${ns}:${tag}`);
  await expectStatus(await put(s, ns, tag, m2.body), 201, `moving push ${ns}:${tag}`);
  assert.equal(await tagDigest(s, ns, tag), m2.digest);
}

Deno.test({
  name: "global immutable_tags with exclusions",
  ...opts,
  fn: (t) =>
    withServer({
      config: `[global]
immutable_tags = true
immutable_tags_exclusions = ["latest", "dev-.*", "nightly|edge"]
`,
    }, async (s) => {
      const ns = "imm/global";

      await t.step("first push and same-digest re-push succeed; moving is 409 DENIED", async () => {
        await assertImmutable(s, ns, "v1.0");
      });

      await t.step("immutability holds in every namespace", async () => {
        await assertImmutable(s, "other/app", "v1.0");
        await assertImmutable(s, "deep/er/name", "stable");
      });

      await t.step("an excluded tag can be moved", async () => {
        await assertMutable(s, ns, "latest");
        await assertMutable(s, ns, "dev-123");
        await assertMutable(s, ns, "nightly");
        await assertMutable(s, ns, "edge");
      });

      await t.step("exclusions match the whole tag only", async () => {
        await assertImmutable(s, ns, "latest-x");
        await assertImmutable(s, ns, "x-latest");
        await assertImmutable(s, ns, "mydev-1");
        await assertImmutable(s, ns, "nightly-edge");
        // `dev-.*` needs the hyphen: a bare `dev` is not excluded.
        await assertImmutable(s, ns, "dev");
      });

      await t.step("PUT by digest with a tag parameter cannot move an immutable tag", async () => {
        const m1 = await manifest("bydigest 1");
        const m2 = await manifest("bydigest 2");
        await expectStatus(await put(s, ns, "pinned", m1.body), 201, "first push");
        const r = await req(s, `/v2/${ns}/manifests/${m2.digest}?tag=pinned`, {
          method: "PUT",
          body: m2.body as BodyInit,
          headers: { "content-type": OCI_MANIFEST },
        });
        await assertError(r, 409, "DENIED");
        assert.equal(await tagDigest(s, ns, "pinned"), m1.digest);
      });

      await t.step("PUT by digest re-tagging the same digest is accepted", async () => {
        const m = await manifest("same digest");
        await expectStatus(await put(s, ns, "same", m.body), 201, "first push");
        const r = await req(s, `/v2/${ns}/manifests/${m.digest}?tag=same`, {
          method: "PUT",
          body: m.body as BodyInit,
          headers: { "content-type": OCI_MANIFEST },
        });
        await expectStatus(r, 201, "PUT by digest");
        assert.equal(await tagDigest(s, ns, "same"), m.digest);
      });

      await t.step("PUT by digest with a new tag parameter creates it", async () => {
        const m = await manifest("bydigest new");
        const r = await req(s, `/v2/${ns}/manifests/${m.digest}?tag=brand-new`, {
          method: "PUT",
          body: m.body as BodyInit,
          headers: { "content-type": OCI_MANIFEST },
        });
        await expectStatus(r, 201, "PUT by digest");
        assert.equal(await tagDigest(s, ns, "brand-new"), m.digest);
      });

      await t.step("pushes by digest alone are unaffected", async () => {
        const m = await manifest("untagged");
        await expectStatus(await put(s, ns, m.digest, m.body), 201, "PUT by digest");
        await expectStatus(await put(s, ns, m.digest, m.body), 201, "PUT by digest again");
      });

      await t.step(
        "DELETE by tag of an immutable tag is allowed; the name is free again",
        async () => {
          const m1 = await manifest("deletable 1");
          const m2 = await manifest("deletable 2");
          await expectStatus(await put(s, ns, "gone", m1.body), 201, "first push");
          const r = await req(s, `/v2/${ns}/manifests/gone`, { method: "DELETE" });
          await expectStatus(r, 202, "DELETE by tag");
          assert.equal(await tagDigest(s, ns, "gone"), null);
          assert.equal(await tagDigest(s, ns, m1.digest), m1.digest);
          await expectStatus(await put(s, ns, "gone", m2.body), 201, "push after delete");
          assert.equal(await tagDigest(s, ns, "gone"), m2.digest);
        },
      );

      await t.step("DELETE by digest removes immutable tags with the revision", async () => {
        const m1 = await manifest("digest delete 1");
        const m2 = await manifest("digest delete 2");
        await expectStatus(await put(s, ns, "rev", m1.body), 201, "first push");
        const r = await req(s, `/v2/${ns}/manifests/${m1.digest}`, { method: "DELETE" });
        await expectStatus(r, 202, "DELETE by digest");
        assert.equal(await tagDigest(s, ns, "rev"), null);
        await expectStatus(await put(s, ns, "rev", m2.body), 201, "push after delete");
      });

      await t.step("a replication timestamp does not bypass immutability", async () => {
        const m1 = await manifest("replicated 1");
        const m2 = await manifest("replicated 2");
        await expectStatus(
          await put(s, ns, "repl", m1.body, { "X-Svc-Source-Timestamp": "2020-01-01T00:00:00Z" }),
          201,
          "first push",
        );
        // Newer by LWW, so only immutability can refuse it, and it does so with DENIED.
        await assertError(
          await put(s, ns, "repl", m2.body, { "X-Svc-Source-Timestamp": "2021-01-01T00:00:00Z" }),
          409,
          "DENIED",
        );
        assert.equal(await tagDigest(s, ns, "repl"), m1.digest);
      });
    }),
});

Deno.test({
  name: "per-repository immutable_tags",
  ...opts,
  fn: (t) =>
    withServer({
      config: `[repository."locked"]
immutable_tags = true
immutable_tags_exclusions = ["latest"]

[repository."locked/open"]
immutable_tags = false
`,
    }, async (s) => {
      await t.step("namespaces in the repository have immutable tags", async () => {
        await assertImmutable(s, "locked", "v1");
        await assertImmutable(s, "locked/app", "v1");
        await assertImmutable(s, "locked/app/sub", "v1");
      });

      await t.step("the repository's exclusions apply", async () => {
        await assertMutable(s, "locked/app", "latest");
        await assertImmutable(s, "locked/app", "latest-x");
        await assertImmutable(s, "locked/app", "xlatest");
      });

      await t.step("namespaces outside the repository stay mutable", async () => {
        await assertMutable(s, "free/app", "v1");
        // A name prefix without a `/` boundary is another repository.
        await assertMutable(s, "lockedx/app", "v1");
        await assertMutable(s, "locked-app", "v1");
      });

      await t.step("the longest configured repository governs", async () => {
        await assertMutable(s, "locked/open", "v1");
        await assertMutable(s, "locked/open/app", "v1");
        await assertImmutable(s, "locked/opener", "v1");
      });
    }),
});

Deno.test({
  name: "repository setting overrides global immutable_tags",
  ...opts,
  fn: (t) =>
    withServer({
      config: `[global]
immutable_tags = true

[repository."scratch"]
immutable_tags = false
`,
    }, async (s) => {
      await t.step("a repository turning immutability off is mutable", async () => {
        await assertMutable(s, "scratch/app", "v1");
      });

      await t.step("other namespaces follow the global setting", async () => {
        await assertImmutable(s, "prod/app", "v1");
      });
    }),
});
