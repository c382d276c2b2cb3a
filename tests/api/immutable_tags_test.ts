// Immutable tags (SPEC §Errors DENIED 409; DESIGN "Immutable tags"): a push that would move an
// existing tag to another digest is 409 DENIED; a first push and a same-digest re-push succeed;
// exclusions are full-match regexes; global and per-repository settings. SPEC forbids only moving
// a tag, so DELETE by tag of an immutable tag is allowed and the name can then be pushed afresh.
import assert from "node:assert/strict";
import { assertError, expectStatus, req, serverTestOpts, tagDigest } from "../helpers/api.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

/** Asserts `tag` in `ns` is immutable: first push ok, same digest ok, moving it 409 DENIED. */
async function assertImmutable(s: TestServer, ns: string, tag: string): Promise<void> {
  const m1 = await distinctManifest(`${ns}:${tag} 1`);
  const m2 = await distinctManifest(`${ns}:${tag} 2`);
  await expectStatus(await putManifest(s, ns, tag, m1.body), 201, `first push ${ns}:${tag}`);
  await expectStatus(
    await putManifest(s, ns, tag, m1.body),
    201,
    `same-digest re-push ${ns}:${tag}`,
  );
  await assertError(await putManifest(s, ns, tag, m2.body), 409, "DENIED");
  assert.equal(await tagDigest(s, ns, tag), m1.digest, `${ns}:${tag} moved`);
}

/** Asserts `tag` in `ns` is mutable: a second push moves it. */
async function assertMutable(s: TestServer, ns: string, tag: string): Promise<void> {
  const m1 = await distinctManifest(`${ns}:${tag} 1`);
  const m2 = await distinctManifest(`${ns}:${tag} 2`);
  await expectStatus(await putManifest(s, ns, tag, m1.body), 201, `first push ${ns}:${tag}`);
  await expectStatus(await putManifest(s, ns, tag, m2.body), 201, `moving push ${ns}:${tag}`);
  assert.equal(await tagDigest(s, ns, tag), m2.digest);
}

Deno.test({
  name: "global immutable_tags with exclusions",
  ...serverTestOpts,
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
        const m1 = await distinctManifest("bydigest 1");
        const m2 = await distinctManifest("bydigest 2");
        await expectStatus(await putManifest(s, ns, "pinned", m1.body), 201, "first push");
        const r = await putManifest(s, ns, m2.digest, m2.body, OCI_MANIFEST, "?tag=pinned");
        await assertError(r, 409, "DENIED");
        assert.equal(await tagDigest(s, ns, "pinned"), m1.digest);
      });

      await t.step("PUT by digest re-tagging the same digest is accepted", async () => {
        const m = await distinctManifest("same digest");
        await expectStatus(await putManifest(s, ns, "same", m.body), 201, "first push");
        const r = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=same");
        await expectStatus(r, 201, "PUT by digest");
        assert.equal(await tagDigest(s, ns, "same"), m.digest);
      });

      await t.step("PUT by digest with a new tag parameter creates it", async () => {
        const m = await distinctManifest("bydigest new");
        const r = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=brand-new");
        await expectStatus(r, 201, "PUT by digest");
        assert.equal(await tagDigest(s, ns, "brand-new"), m.digest);
      });

      await t.step("pushes by digest alone are unaffected", async () => {
        const m = await distinctManifest("untagged");
        await expectStatus(await putManifest(s, ns, m.digest, m.body), 201, "PUT by digest");
        await expectStatus(await putManifest(s, ns, m.digest, m.body), 201, "PUT by digest again");
      });

      await t.step(
        "DELETE by tag of an immutable tag is allowed; the name is free again",
        async () => {
          const m1 = await distinctManifest("deletable 1");
          const m2 = await distinctManifest("deletable 2");
          await expectStatus(await putManifest(s, ns, "gone", m1.body), 201, "first push");
          const r = await req(s, `/v2/${ns}/manifests/gone`, { method: "DELETE" });
          await expectStatus(r, 202, "DELETE by tag");
          assert.equal(await tagDigest(s, ns, "gone"), null);
          assert.equal(await tagDigest(s, ns, m1.digest), m1.digest);
          await expectStatus(await putManifest(s, ns, "gone", m2.body), 201, "push after delete");
          assert.equal(await tagDigest(s, ns, "gone"), m2.digest);
        },
      );

      await t.step("DELETE by digest removes immutable tags with the revision", async () => {
        const m1 = await distinctManifest("digest delete 1");
        const m2 = await distinctManifest("digest delete 2");
        await expectStatus(await putManifest(s, ns, "rev", m1.body), 201, "first push");
        const r = await req(s, `/v2/${ns}/manifests/${m1.digest}`, { method: "DELETE" });
        await expectStatus(r, 202, "DELETE by digest");
        assert.equal(await tagDigest(s, ns, "rev"), null);
        await expectStatus(await putManifest(s, ns, "rev", m2.body), 201, "push after delete");
      });

      await t.step("a replication timestamp does not bypass immutability", async () => {
        const m1 = await distinctManifest("replicated 1");
        const m2 = await distinctManifest("replicated 2");
        await expectStatus(
          await putManifest(s, ns, "repl", m1.body, OCI_MANIFEST, "", {
            "X-Svc-Source-Timestamp": "2020-01-01T00:00:00Z",
          }),
          201,
          "first push",
        );
        // Newer by LWW, so only immutability can refuse it, and it does so with DENIED.
        await assertError(
          await putManifest(s, ns, "repl", m2.body, OCI_MANIFEST, "", {
            "X-Svc-Source-Timestamp": "2021-01-01T00:00:00Z",
          }),
          409,
          "DENIED",
        );
        assert.equal(await tagDigest(s, ns, "repl"), m1.digest);
      });
    }),
});

Deno.test({
  name: "per-repository immutable_tags",
  ...serverTestOpts,
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
  ...serverTestOpts,
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
