// SPEC §Manifests, replication header rules 1-6 on the receiving side: `X-Svc-Source-Timestamp`
// last-writer-wins for tag PUT and DELETE, DELETE by digest guarded through every tag, PUT by
// digest unguarded, unparseable headers as ordinary writes, future dates clamped, backdated
// timestamps persisted verbatim.
import assert from "node:assert/strict";
import { assertError, expectStatus, req, serverTestOpts, tagDigest } from "../helpers/api.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

const TS = "X-Svc-Source-Timestamp";

function tsHeader(ts?: string): Record<string, string> {
  return ts === undefined ? {} : { [TS]: ts };
}

function put(
  s: TestServer,
  ns: string,
  ref: string,
  body: Uint8Array,
  ts?: string,
): Promise<Response> {
  return putManifest(s, ns, ref, body, OCI_MANIFEST, "", tsHeader(ts));
}

function del(s: TestServer, ns: string, ref: string, ts?: string): Promise<Response> {
  return req(s, `/v2/${ns}/manifests/${ref}`, { method: "DELETE", headers: tsHeader(ts) });
}

async function digestExists(s: TestServer, ns: string, digest: string): Promise<boolean> {
  return (await tagDigest(s, ns, digest)) !== null;
}

const isoMinutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();

Deno.test({
  name: "replication timestamp on tag PUT",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "repl/put";
      const m1 = await distinctManifest("m1");
      const m2 = await distinctManifest("m2");
      const m3 = await distinctManifest("m3");

      await t.step("a first replicated push with a backdated timestamp is accepted", async () => {
        await expectStatus(await put(s, ns, "t", m1.body, "2020-06-01T00:00:00Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "t"), m1.digest);
      });

      await t.step("an older timestamp is 409 REPLICATION_SUPERSEDED, tag unchanged", async () => {
        await assertError(
          await put(s, ns, "t", m2.body, "2020-05-31T23:59:59Z"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        assert.equal(await tagDigest(s, ns, "t"), m1.digest);
      });

      await t.step("the same instant in another offset is still older", async () => {
        // 01:00+02:00 is 23:00Z the day before: parsed as RFC 3339, not compared as text.
        await assertError(
          await put(s, ns, "t", m2.body, "2020-06-01T01:00:00+02:00"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        assert.equal(await tagDigest(s, ns, "t"), m1.digest);
      });

      await t.step("a newer timestamp wins although it lies in the past", async () => {
        // Had the backdated time not been persisted verbatim (but "now"), this would lose.
        await expectStatus(await put(s, ns, "t", m2.body, "2020-06-01T00:00:01Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "t"), m2.digest);
      });

      await t.step("an equal timestamp is not strictly newer, so it wins", async () => {
        await expectStatus(await put(s, ns, "t", m3.body, "2020-06-01T00:00:01Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "t"), m3.digest);
      });

      await t.step("fractional seconds and lowercase separators parse", async () => {
        await assertError(
          await put(s, ns, "t", m1.body, "2020-06-01T00:00:00.999Z"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        // RFC 3339 §5.6 allows lowercase `t` and `z`.
        await assertError(
          await put(s, ns, "t", m1.body, "2020-06-01t00:00:00.5z"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        await expectStatus(await put(s, ns, "t", m1.body, "2020-06-01T00:00:01.5Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "t"), m1.digest);
      });

      await t.step(
        "a tag pushed by an ordinary client beats an older replicated write",
        async () => {
          await expectStatus(await put(s, ns, "local", m1.body), 201, "PUT");
          await assertError(
            await put(s, ns, "local", m2.body, isoMinutesAgo(10)),
            409,
            "REPLICATION_SUPERSEDED",
          );
          assert.equal(await tagDigest(s, ns, "local"), m1.digest);
        },
      );

      await t.step("a replicated write of an absent tag is never superseded", async () => {
        await expectStatus(await put(s, ns, "fresh", m2.body, "1999-01-01T00:00:00Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "fresh"), m2.digest);
      });
    }),
});

Deno.test({
  name: "replication timestamp: unparseable, future-dated, and PUT by digest",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "repl/edge";
      const m1 = await distinctManifest("m1");
      const m2 = await distinctManifest("m2");
      const m3 = await distinctManifest("m3");

      for (const bad of ["yesterday", "2020-13-45T00:00:00Z", "2020-06-01", "", "1591000000"]) {
        await t.step(`header ${JSON.stringify(bad)} disables LWW: ordinary write`, async () => {
          await expectStatus(await put(s, ns, "u", m1.body, "2999-01-01T00:00:00Z"), 201, "PUT");
          // The local tag is now as new as it gets; only an ordinary write can still move it.
          await expectStatus(await put(s, ns, "u", m2.body, bad), 201, `PUT with ${bad}`);
          assert.equal(await tagDigest(s, ns, "u"), m2.digest);
        });
      }

      await t.step("a future-dated timestamp is clamped to the receiver's now", async () => {
        await expectStatus(await put(s, ns, "f", m1.body, "2999-01-01T00:00:00Z"), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "f"), m1.digest);
        await new Promise((r) => setTimeout(r, 50));
        // Stored verbatim, 2999 would make this present-day write lose.
        await expectStatus(await put(s, ns, "f", m2.body, new Date().toISOString()), 201, "PUT");
        assert.equal(await tagDigest(s, ns, "f"), m2.digest);
      });

      await t.step("after clamping, a write older than the receiver's now loses", async () => {
        await expectStatus(await put(s, ns, "g", m1.body, "2999-01-01T00:00:00Z"), 201, "PUT");
        await assertError(
          await put(s, ns, "g", m2.body, isoMinutesAgo(5)),
          409,
          "REPLICATION_SUPERSEDED",
        );
        assert.equal(await tagDigest(s, ns, "g"), m1.digest);
      });

      await t.step("a PUT by digest is not guarded", async () => {
        await expectStatus(await put(s, ns, "p", m3.body, "2021-01-01T00:00:00Z"), 201, "PUT");
        await expectStatus(
          await put(s, ns, m3.digest, m3.body, "1990-01-01T00:00:00Z"),
          201,
          "PUT by digest",
        );
        const fresh = await distinctManifest("fresh");
        await expectStatus(
          await put(s, ns, fresh.digest, fresh.body, "1990-01-01T00:00:00Z"),
          201,
          "PUT by digest",
        );
        assert.ok(await digestExists(s, ns, fresh.digest));
        assert.equal(await tagDigest(s, ns, "p"), m3.digest);
      });
    }),
});

Deno.test({
  name: "replication timestamp on DELETE",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "repl/del";
      const m1 = await distinctManifest("m1");
      const m2 = await distinctManifest("m2");

      await t.step("DELETE by tag older than the local tag is 409, tag kept", async () => {
        await expectStatus(await put(s, ns, "a", m1.body, "2020-06-01T00:00:00Z"), 201, "PUT");
        await assertError(
          await del(s, ns, "a", "2020-05-01T00:00:00Z"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        assert.equal(await tagDigest(s, ns, "a"), m1.digest);
      });

      await t.step("DELETE by tag newer than the local tag removes it", async () => {
        await expectStatus(await del(s, ns, "a", "2020-07-01T00:00:00Z"), 202, "DELETE");
        assert.equal(await tagDigest(s, ns, "a"), null);
        assert.ok(await digestExists(s, ns, m1.digest));
      });

      await t.step("DELETE by tag with an unparseable header is an ordinary delete", async () => {
        await expectStatus(await put(s, ns, "b", m1.body), 201, "PUT");
        await expectStatus(await del(s, ns, "b", "not a time"), 202, "DELETE");
        assert.equal(await tagDigest(s, ns, "b"), null);
      });

      await t.step("DELETE by digest is refused when any tag on it is newer", async () => {
        await expectStatus(await put(s, ns, "x", m2.body, "2020-01-01T00:00:00Z"), 201, "PUT");
        await expectStatus(await put(s, ns, "y", m2.body, "2022-01-01T00:00:00Z"), 201, "PUT");
        await assertError(
          await del(s, ns, m2.digest, "2021-01-01T00:00:00Z"),
          409,
          "REPLICATION_SUPERSEDED",
        );
        // The whole delete is rejected: the older tag survives too.
        assert.equal(await tagDigest(s, ns, "x"), m2.digest);
        assert.equal(await tagDigest(s, ns, "y"), m2.digest);
        assert.ok(await digestExists(s, ns, m2.digest));
      });

      await t.step("DELETE by digest newer than every tag removes revision and tags", async () => {
        await expectStatus(await del(s, ns, m2.digest, "2023-01-01T00:00:00Z"), 202, "DELETE");
        assert.equal(await tagDigest(s, ns, "x"), null);
        assert.equal(await tagDigest(s, ns, "y"), null);
        assert.equal(await digestExists(s, ns, m2.digest), false);
      });

      await t.step("DELETE by digest of an untagged revision is never superseded", async () => {
        const m3 = await distinctManifest("m3");
        await expectStatus(await put(s, ns, m3.digest, m3.body), 201, "PUT");
        await expectStatus(await del(s, ns, m3.digest, "1990-01-01T00:00:00Z"), 202, "DELETE");
        assert.equal(await digestExists(s, ns, m3.digest), false);
      });

      await t.step("DELETE by digest guarded by a tag an ordinary push just made", async () => {
        const m4 = await distinctManifest("m4");
        await expectStatus(await put(s, ns, "z", m4.body), 201, "PUT");
        await assertError(
          await del(s, ns, m4.digest, isoMinutesAgo(10)),
          409,
          "REPLICATION_SUPERSEDED",
        );
        assert.equal(await tagDigest(s, ns, "z"), m4.digest);
        // Without the header, the same delete is an ordinary one and succeeds.
        await expectStatus(await del(s, ns, m4.digest), 202, "DELETE");
        assert.equal(await tagDigest(s, ns, "z"), null);
      });
    }),
});
