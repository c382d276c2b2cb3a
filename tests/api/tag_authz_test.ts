// Every tag a request writes passes authorization (issue 35, item 1): a push by digest is decided
// once per `tag` parameter (CEL sees each as `request.tag`, the authorization webhook gets each
// as `X-Svc-Tag`), and a refusal of any refuses the push with nothing written, as a push naming
// the tag in its path is refused. A delete by digest is decided as itself and per tag it removes;
// a diff per image it compares.
import assert from "node:assert/strict";
import { assertError, expectStatus, req, serverTestOpts, tagDigest } from "../helpers/api.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const DEV = { authorization: `Basic ${btoa("dev:dev-pw-41c9")}` };

async function devIdentity(): Promise<string> {
  const hash = await hashPassword("dev-pw-41c9", { memoryCost: 1024, timeCost: 1, parallelism: 1 });
  return `\n[auth.identity.dev]\nusername = "dev"\npassword = "${hash}"\n`;
}

/** A refusal as SPEC answers it: 401 with a challenge for anonymous, 403 DENIED otherwise. */
async function assertRefused(r: Response, anonymous: boolean): Promise<void> {
  if (anonymous) {
    assert.ok(r.headers.get("www-authenticate"), "a 401 carries its challenge");
    await assertError(r, 401, "UNAUTHORIZED");
  } else {
    await assertError(r, 403, "DENIED");
  }
}

/** The push and tags it names were not written: the digest and every tag answer 404. */
async function assertNothingWritten(
  s: TestServer,
  ns: string,
  digest: string,
  tags: string[],
): Promise<void> {
  assert.equal(await tagDigest(s, ns, digest), null, `${ns}@${digest} was stored`);
  for (const t of tags) assert.equal(await tagDigest(s, ns, t), null, `${ns}:${t} exists`);
}

const del = (s: TestServer, ns: string, ref: string, headers: Record<string, string> = {}) =>
  req(s, `/v2/${ns}/manifests/${ref}`, { method: "DELETE", headers });

Deno.test({
  name: "tag authorization: the access policy decides each tag a push by digest writes",
  ...serverTestOpts,
  fn: async (t) =>
    await withServer({
      // `pub` has the rule guarded with has(); `bare` the rule as written, which reads an
      // absent request.tag on a push by digest without tags and so refuses it (fail closed).
      config: `${await devIdentity()}
[global.access_policy]
default = "allow"
rules = [
  'request.action == "put-manifest" && has(request.tag) && request.tag == "prod"',
  'request.action == "diff-images" && has(request.tag) && request.tag == "secret"',
]

[repository."bare".access_policy]
default = "allow"
rules = ['request.action == "put-manifest" && request.tag == "prod"']
`,
    }, async (s) => {
      for (const ns of ["pub/app", "bare/app"]) {
        await t.step(`${ns}: PUT …/manifests/prod is refused`, async () => {
          const m = await distinctManifest(`${ns} by tag`);
          await assertRefused(await putManifest(s, ns, "prod", m.body), true);
          await assertRefused(
            await putManifest(s, ns, "prod", m.body, OCI_MANIFEST, "", DEV),
            false,
          );
          await assertNothingWritten(s, ns, m.digest, ["prod"]);
        });

        await t.step(`${ns}: PUT …/manifests/<digest>?tag=prod is refused alike`, async () => {
          const m = await distinctManifest(`${ns} by digest`);
          await assertRefused(
            await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=prod"),
            true,
          );
          await assertRefused(
            await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=prod", DEV),
            false,
          );
          await assertNothingWritten(s, ns, m.digest, ["prod"]);
        });

        await t.step(`${ns}: one refused tag among several refuses them all`, async () => {
          const m = await distinctManifest(`${ns} several`);
          for (
            const q of ["?tag=ok&tag=prod", "?tag=prod&tag=ok", "?tag=a&tag=ok&tag=prod&tag=a"]
          ) {
            await assertRefused(
              await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, q, DEV),
              false,
            );
            await assertNothingWritten(s, ns, m.digest, ["ok", "prod", "a"]);
          }
        });

        await t.step(`${ns}: allowed tags are created (OCI-Tag)`, async () => {
          const m = await distinctManifest(`${ns} allowed`);
          const r = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=ok");
          assert.equal(r.headers.get("oci-tag"), "ok");
          await expectStatus(r, 201, "push by digest with ?tag=ok");
          assert.equal(await tagDigest(s, ns, "ok"), m.digest);
          const two = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=v1&tag=v2");
          assert.equal(two.headers.get("oci-tag"), "v1, v2");
          await expectStatus(two, 201, "push by digest with two tags");
          assert.equal(await tagDigest(s, ns, "v2"), m.digest);
        });
      }

      await t.step("a push by digest without tags is decided as before", async () => {
        const m = await distinctManifest("untagged");
        await expectStatus(
          await putManifest(s, "pub/app", m.digest, m.body),
          201,
          "has()-guarded rule: no tag, allowed",
        );
        // The unguarded rule reads the absent request.tag: it errors and so refuses.
        const n = await distinctManifest("untagged bare");
        await assertRefused(await putManifest(s, "bare/app", n.digest, n.body), true);
        assert.equal(await tagDigest(s, "bare/app", n.digest), null);
      });

      await t.step(
        "a malformed or excessive tag parameter is 400 before any decision",
        async () => {
          const m = await distinctManifest("malformed");
          await assertError(
            await putManifest(s, "pub/app", m.digest, m.body, OCI_MANIFEST, "?tag=fresh&tag=-bad"),
            400,
            "UNSUPPORTED",
          );
          const many = "?" + Array.from({ length: 1001 }, (_, i) => `tag=t${i}`).join("&");
          await assertError(
            await putManifest(s, "pub/app", m.digest, m.body, OCI_MANIFEST, many),
            400,
            "UNSUPPORTED",
          );
          await assertNothingWritten(s, "pub/app", m.digest, ["fresh", "t0"]);
        },
      );

      await t.step("tag parameters on a push by tag are ignored", async () => {
        const m = await distinctManifest("by tag with params");
        const r = await putManifest(s, "pub/app", "fine", m.body, OCI_MANIFEST, "?tag=prod");
        await expectStatus(r, 201, "push by tag");
        assert.equal(r.headers.get("oci-tag"), null);
        assert.equal(await tagDigest(s, "pub/app", "fine"), m.digest);
        assert.equal(await tagDigest(s, "pub/app", "prod"), null);
      });

      await t.step("a diff is decided for each image it compares", async () => {
        const refused = await req(s, "/v2/pub/app/_svc/diff?from=ok&to=secret", { headers: DEV });
        await assertError(refused, 403, "DENIED");
        const swapped = await req(s, "/v2/pub/app/_svc/diff?from=secret&to=ok");
        await assertError(swapped, 401, "UNAUTHORIZED");
        const allowed = await req(s, "/v2/pub/app/_svc/diff?from=ok&to=v1", { headers: DEV });
        assert.notEqual(allowed.status, 403, "authorized: answered by the diff itself");
        assert.notEqual(allowed.status, 401);
        await allowed.body?.cancel();
      });
    }),
});

Deno.test({
  name: "tag authorization: a delete by digest cannot remove a tag the policy protects",
  ...serverTestOpts,
  fn: async (t) =>
    await withServer({
      config: `${await devIdentity()}
[global.access_policy]
default = "allow"
rules = ['request.action == "delete-manifest" && has(request.tag) && request.tag == "prod"']
`,
    }, async (s) => {
      const ns = "del/app";
      await t.step("DELETE by tag and by digest are both refused for prod", async () => {
        const m = await distinctManifest("prod image");
        await expectStatus(
          await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=prod&tag=x"),
          201,
          "seed",
        );
        await assertRefused(await del(s, ns, "prod"), true);
        await assertRefused(await del(s, ns, "prod", DEV), false);
        await assertRefused(await del(s, ns, m.digest), true);
        await assertRefused(await del(s, ns, m.digest, DEV), false);
        assert.equal(await tagDigest(s, ns, "prod"), m.digest);
        assert.equal(await tagDigest(s, ns, "x"), m.digest, "nothing was removed");
      });

      await t.step("a manifest no protected tag names is deleted by digest", async () => {
        const m = await distinctManifest("other image");
        await expectStatus(
          await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=y"),
          201,
          "seed",
        );
        await expectStatus(await del(s, ns, "x", DEV), 202, "tag x of the prod image");
        await expectStatus(await del(s, ns, m.digest, DEV), 202, "by digest");
        assert.equal(await tagDigest(s, ns, "y"), null);
        const u = await distinctManifest("untagged image");
        await expectStatus(await putManifest(s, ns, u.digest, u.body), 201, "seed");
        await expectStatus(await del(s, ns, u.digest), 202, "untagged, by digest");
      });
    }),
});

Deno.test({
  name: "tag authorization: the authorization webhook gets one decision per tag",
  ...serverTestOpts,
  fn: async (t) => {
    const hook = startReceiver();
    // Refuses writes of `prod` (push or delete), allows everything else.
    hook.decide = (h) =>
      h.get("x-svc-tag") === "prod" && h.get("x-svc-action") !== "get-manifest" ? 403 : 200;
    try {
      await withServer({
        config: `${await devIdentity()}
[auth.webhook.gate]
url = "${hook.url}/authz"

[global]
authorization_webhook = "gate"
`,
      }, async (s) => {
        const ns = "hook/app";
        const since = () => {
          const from = hook.calls.length;
          return () =>
            hook.calls.slice(from).filter((h) => h.get("x-svc-action") !== "get-manifest");
        };

        await t.step("each tag parameter is asked about, with X-Svc-Tag", async () => {
          const m = await distinctManifest("hooked");
          const calls = since();
          const r = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=a&tag=b&tag=a");
          await expectStatus(r, 201, "push by digest with tags");
          const asked = calls();
          assert.equal(asked.length, 2, "one decision per distinct tag");
          assert.deepEqual(asked.map((h) => h.get("x-svc-tag")).sort(), ["a", "b"]);
          for (const h of asked) {
            assert.equal(h.get("x-svc-action"), "put-manifest");
            assert.equal(h.get("x-svc-namespace"), ns);
            assert.equal(h.get("x-svc-digest"), m.digest);
            assert.equal(h.get("x-svc-reference"), m.digest);
          }
        });

        await t.step("a push by digest without tags is asked once, with no tag", async () => {
          const m = await distinctManifest("hooked untagged");
          const calls = since();
          await expectStatus(await putManifest(s, ns, m.digest, m.body), 201, "push by digest");
          const asked = calls();
          assert.equal(asked.length, 1);
          assert.equal(asked[0].get("x-svc-tag"), null);
        });

        await t.step("the webhook refusing one tag refuses the push, nothing written", async () => {
          const m = await distinctManifest("hooked refused");
          const calls = since();
          await assertRefused(
            await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=ok&tag=prod"),
            true,
          );
          assert.ok(calls().some((h) => h.get("x-svc-tag") === "prod"), "prod was asked about");
          await assertRefused(
            await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=prod&tag=ok", DEV),
            false,
          );
          await assertNothingWritten(s, ns, m.digest, ["ok", "prod"]);
          const r = await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=ok", DEV);
          assert.equal(r.headers.get("oci-tag"), "ok");
          await expectStatus(r, 201, "the allowed tag alone");
        });

        await t.step("a delete by digest asks about itself and each tag it removes", async () => {
          const m = await distinctManifest("hooked delete");
          await expectStatus(
            await putManifest(s, ns, m.digest, m.body, OCI_MANIFEST, "?tag=d1&tag=d2"),
            201,
            "seed",
          );
          const calls = since();
          await expectStatus(await del(s, ns, m.digest), 202, "delete by digest");
          const asked = calls();
          assert.deepEqual(
            asked.map((h) => `${h.get("x-svc-action")} ${h.get("x-svc-tag")}`).sort(),
            ["delete-manifest d1", "delete-manifest d2", "delete-manifest null"],
          );
        });

        await t.step("a diff asks about both images it compares", async () => {
          const calls = since();
          const r = await req(s, `/v2/${ns}/_svc/diff?from=ok&to=d1`, { headers: DEV });
          await r.body?.cancel();
          const asked = calls();
          assert.deepEqual(asked.map((h) => h.get("x-svc-reference")).sort(), ["d1", "ok"]);
          assert.ok(asked.every((h) => h.get("x-svc-action") === "diff-images"));
        });
      });
    } finally {
      await hook.stop();
    }
  },
});
