// Immutable tags (SPEC §Errors DENIED 409; DESIGN "Immutable tags"): a push that would move an
// existing tag to another digest is 409 DENIED; a first push and a same-digest re-push succeed;
// exclusions are full-match regexes; global and per-repository settings. Issue 35: a delete is no
// way around it: DELETE of an immutable tag, and DELETE by digest of a manifest one names, are
// 409 DENIED naming the tag; retention keeps such tags and scrub never removes what they name; a
// downstream's refusal of a replicated delete is retried and dead-lettered like a refused push.
import assert from "node:assert/strict";
import {
  assertError,
  assertErrorCode,
  expectStatus,
  req,
  serverTestOpts,
  tagDigest,
} from "../helpers/api.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { pushImage, runCli, type TestServer, withServer } from "../helpers/server.ts";

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
        "DELETE of an immutable tag is 409 DENIED naming it; it still resolves",
        async () => {
          const m1 = await distinctManifest("undeletable 1");
          const m2 = await distinctManifest("undeletable 2");
          await expectStatus(await putManifest(s, ns, "kept", m1.body), 201, "first push");
          const r = await req(s, `/v2/${ns}/manifests/kept`, { method: "DELETE" });
          const e = await assertErrorCode(r, 409, "DENIED");
          assert.match(String(e.detail), /\bkept\b/, "the detail names the tag");
          assert.equal(await tagDigest(s, ns, "kept"), m1.digest);
          // The delete-and-push route to moving it stays closed.
          await assertError(await putManifest(s, ns, "kept", m2.body), 409, "DENIED");
          assert.equal(await tagDigest(s, ns, "kept"), m1.digest);
        },
      );

      await t.step("DELETE by digest of a manifest an immutable tag names is refused", async () => {
        const m = await distinctManifest("digest delete");
        await expectStatus(
          await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=latest&tag=rev"),
          201,
          "push with an excluded and an immutable tag",
        );
        const r = await req(s, `/v2/${ns}/manifests/${m.digest}`, { method: "DELETE" });
        const e = await assertErrorCode(r, 409, "DENIED");
        assert.match(String(e.detail), /\brev\b/, "the detail names the immutable tag");
        assert.equal(await tagDigest(s, ns, "rev"), m.digest);
        assert.equal(await tagDigest(s, ns, "latest"), m.digest, "nothing was removed");
        assert.equal(await tagDigest(s, ns, m.digest), m.digest);
      });

      await t.step("excluded tags and untagged manifests are deleted as before", async () => {
        const m = await distinctManifest("excluded only");
        await expectStatus(
          await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=latest&tag=dev-7"),
          201,
          "push with excluded tags",
        );
        const byTag = await req(s, `/v2/${ns}/manifests/dev-7`, { method: "DELETE" });
        await expectStatus(byTag, 202, "DELETE of an excluded tag");
        assert.equal(await tagDigest(s, ns, "dev-7"), null);
        const byDigest = await req(s, `/v2/${ns}/manifests/${m.digest}`, { method: "DELETE" });
        await expectStatus(byDigest, 202, "DELETE by digest named only by `latest`");
        assert.equal(await tagDigest(s, ns, "latest"), null);
        assert.equal(await tagDigest(s, ns, m.digest), null);
        const u = await distinctManifest("untagged");
        await expectStatus(await putManifest(s, ns, u.digest, u.body), 201, "untagged push");
        const r = await req(s, `/v2/${ns}/manifests/${u.digest}`, { method: "DELETE" });
        await expectStatus(r, 202, "DELETE by digest of an untagged manifest");
      });

      await t.step("a replicated delete is refused alike, unless superseded", async () => {
        const m = await distinctManifest("replicated delete");
        await expectStatus(
          await putManifest(s, ns, "rdel", m.body, OCI_MANIFEST, "", {
            "X-Svc-Source-Timestamp": "2020-01-01T00:00:00Z",
          }),
          201,
          "first push",
        );
        const newer = { "X-Svc-Source-Timestamp": "2021-01-01T00:00:00Z" };
        for (const ref of ["rdel", m.digest]) {
          const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
            method: "DELETE",
            headers: newer,
          });
          await assertError(r, 409, "DENIED");
        }
        // Older than the local tag: last-writer-wins answers first, as for a push.
        const older = { "X-Svc-Source-Timestamp": "2019-01-01T00:00:00Z" };
        const r = await req(s, `/v2/${ns}/manifests/rdel`, { method: "DELETE", headers: older });
        await assertError(r, 409, "REPLICATION_SUPERSEDED");
        assert.equal(await tagDigest(s, ns, "rdel"), m.digest);
      });

      await t.step("one immutable tag among 120 refuses the delete by digest", async () => {
        const m = await distinctManifest("many tags");
        const q = "?" + Array.from({ length: 119 }, (_, i) => `tag=dev-${i}`).join("&") +
          "&tag=pinned-many";
        await expectStatus(
          await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, q),
          201,
          "push with 120 tags",
        );
        const r = await req(s, `/v2/${ns}/manifests/${m.digest}`, { method: "DELETE" });
        await assertError(r, 409, "DENIED");
        assert.equal(await tagDigest(s, ns, "dev-0"), m.digest, "no tag was removed");
        assert.equal(await tagDigest(s, ns, "dev-118"), m.digest);
        assert.equal(await tagDigest(s, ns, "pinned-many"), m.digest);
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

      await t.step("a repository's immutable tags cannot be deleted", async () => {
        const m = await distinctManifest("locked delete");
        await expectStatus(await putManifest(s, "locked/app", "v9", m.body), 201, "push");
        const r = await req(s, "/v2/locked/app/manifests/v9", { method: "DELETE" });
        await assertError(r, 409, "DENIED");
        const d = await req(s, `/v2/locked/app/manifests/${m.digest}`, { method: "DELETE" });
        await assertError(d, 409, "DENIED");
        assert.equal(await tagDigest(s, "locked/app", "v9"), m.digest);
      });

      await t.step("outside it, and where it is turned off, deletes are unchanged", async () => {
        for (const ns of ["free/app", "locked/open/app"]) {
          const m = await distinctManifest(`${ns} deletable`);
          const q = "?tag=v1-del&tag=v2-del";
          await expectStatus(await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, q), 201, ns);
          const r = await req(s, `/v2/${ns}/manifests/v1-del`, { method: "DELETE" });
          await expectStatus(r, 202, `${ns}: DELETE by tag`);
          const d = await req(s, `/v2/${ns}/manifests/${m.digest}`, { method: "DELETE" });
          await expectStatus(d, 202, `${ns}: DELETE by digest`);
          assert.equal(await tagDigest(s, ns, "v2-del"), null);
        }
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

Deno.test({
  name: "retention and scrub keep immutable tags and what they name",
  ...serverTestOpts,
  fn: (t) =>
    withServer({
      config: `[repository."ret"]
immutable_tags = true
immutable_tags_exclusions = ["tmp-.*"]

[global.retention_policy]
rules = ['image.tag == "keep"']

[global.scrub]
grace_secs = 0
`,
    }, async (s) => {
      const ns = "ret/app";
      const pinned = await pushImage(s.url, ns, "v1");
      // The same manifest under an excluded tag too: that tag may go, the manifest may not.
      await expectStatus(
        await putManifest(s, ns, pinned.digest, pinned.body, OCI_MANIFEST, "?tag=tmp-a"),
        201,
        "second tag",
      );
      const scratch = await pushImage(s.url, ns, "tmp-b");
      const kept = await pushImage(s.url, ns, "keep");

      await t.step("a dry run reports the immutable tag protected", async () => {
        const dry = await runCli(s, "prune", ["--dry-run"]);
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(
          dry.stdout,
          /keep ret\/app:v1 \(sha256:[0-9a-f]+\): protected: an immutable tag/,
        );
        assert.match(dry.stdout, /delete ret\/app:tmp-a/);
        assert.doesNotMatch(dry.stdout, new RegExp(`delete ret/app@${pinned.digest}`));
        assert.match(dry.stdout, /would delete 2 tag\(s\) and 1 manifest\(s\), 1 protected/);
        assert.equal(await tagDigest(s, ns, "tmp-a"), pinned.digest, "a dry run deletes nothing");
      });

      await t.step("prune deletes the mutable tags only, without failures", async () => {
        const run = await runCli(s, "prune");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /deleted 2 tag\(s\) and 1 manifest\(s\), 1 protected/);
        assert.match(run.stdout, / 0 failure\(s\)/);
        assert.equal(await tagDigest(s, ns, "v1"), pinned.digest);
        assert.equal(await tagDigest(s, ns, "keep"), kept.digest);
        assert.equal(await tagDigest(s, ns, "tmp-a"), null);
        assert.equal(await tagDigest(s, ns, "tmp-b"), null);
        assert.equal(await tagDigest(s, ns, scratch.digest), null, "its manifest went with it");
      });

      await t.step("scrub leaves the immutable tag's manifest and blobs whole", async () => {
        const run = await runCli(s, "scrub");
        assert.equal(run.code, 0, run.stderr);
        const m = await req(s, `/v2/${ns}/manifests/v1`);
        assert.equal(m.status, 200);
        assert.deepEqual(new Uint8Array(await m.arrayBuffer()), pinned.body);
        for (const d of [pinned.config, pinned.layer]) {
          const b = await req(s, `/v2/${ns}/blobs/${d}`);
          await expectStatus(b, 200, `blob ${d}`);
        }
      });
    }),
});

const FAST_JOBS = `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 50
backoff_max_ms = 200
max_attempts = 3
`;

async function failedJobs(s: TestServer): Promise<Record<string, unknown>[]> {
  const r = await req(s, "/v2/_svc/jobs/failed?queue=replication&n=1000");
  return (await r.json()).failed;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test({
  name: "replication: a downstream refusing to delete an immutable tag retries, then dead-letters",
  ...serverTestOpts,
  fn: (t) =>
    withServer(
      { config: `${FAST_JOBS}[repository."rep"]\nimmutable_tags = true\n` },
      (b) =>
        withServer({
          config: `${FAST_JOBS}
[[repository."rep".downstream]]
name = "b"
url = "${b.url}"
connect_timeout_secs = 2
read_timeout_secs = 5
`,
        }, async (a) => {
          const ns = "rep/app";
          const img = await pushImage(a.url, ns, "v1");
          await until(
            "the push downstream",
            async () => await tagDigest(b, ns, "v1") === img.digest,
          );

          await t.step("a tag delete: 409 DENIED downstream, retried, dead-lettered", async () => {
            await expectStatus(
              await req(a, `/v2/${ns}/manifests/v1`, { method: "DELETE" }),
              202,
              "the local repository is mutable",
            );
            await until("the dead letter", async () => (await failedJobs(a)).length === 1);
            const [f] = await failedJobs(a);
            assert.equal(f.attempts, 3, "retried up to max_attempts, not completed as superseded");
            assert.match(String(f.last_error), /409.*DENIED/);
            assert.match(String(f.last_error), /immutable/);
            assert.equal(await tagDigest(b, ns, "v1"), img.digest, "the downstream kept its tag");
          });

          await t.step("a digest delete is refused and dead-lettered alike", async () => {
            const other = await pushImage(a.url, ns, "v2");
            await until("v2 downstream", async () => await tagDigest(b, ns, "v2") === other.digest);
            await expectStatus(
              await req(a, `/v2/${ns}/manifests/${other.digest}`, { method: "DELETE" }),
              202,
              "local delete by digest",
            );
            await until("the second dead letter", async () => (await failedJobs(a)).length === 2);
            const f = (await failedJobs(a)).find((j) =>
              String(j.last_error).includes(other.digest)
            )!;
            assert.ok(f, "the digest delete's job failed");
            assert.match(String(f.last_error), /409.*DENIED/);
            assert.equal(await tagDigest(b, ns, "v2"), other.digest);
          });
        }),
    ),
});
