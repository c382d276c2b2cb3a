// SPEC §Pull history entry, §Pulls listing: manifest GETs recorded per tag or digest with the
// pulling identity (HEAD is a check, not a pull), newest first, paged by n/offset/next; malformed
// targets and page values answer 404; last_pulled_at in the revisions listing; and with
// update_pull_time off nothing is recorded or reported.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import { imageManifest, OCI_EMPTY, OCI_MANIFEST, putManifestOk } from "../helpers/oci_content.ts";
import { pushImage, type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const ALICE = { authorization: `Basic ${btoa("alice:pw-alice")}` };
const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pull(
  s: TestServer,
  ns: string,
  ref: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<void> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, { method, headers });
  await r.body?.cancel();
  assert.equal(r.status, 200, `${method} ${ns}:${ref}`);
  // Distinct milliseconds keep the expected order unambiguous.
  await sleep(3);
}

async function pulls(s: TestServer, ns: string, query: string) {
  const r = await req(s, `/v2/${ns}/_svc/pulls/list${query}`);
  const text = await r.text();
  assert.equal(r.status, 200, `${query}: ${r.status} ${text}`);
  assert.equal(r.headers.get("content-type"), "application/json");
  return JSON.parse(text);
}

const clients = (body: { entries: { client: string }[] }) => body.entries.map((e) => e.client);

Deno.test("SPEC §Pulls listing: update_pull_time on", serverTestOpts, async (t) => {
  const config = `
[global]
update_pull_time = true
max_pulls = 3
max_age_secs = 86400

[auth.identity.alice]
username = "alice"
password = "${await hashPassword("pw-alice")}"
`;
  await withServer({ config }, async (s) => {
    const since = Date.now();
    const img = await pushImage(s.url, "p/app", "v1");
    await pull(s, "p/app", "v1");
    await pull(s, "p/app", "v1");
    await pull(s, "p/app", "v1", {}, "HEAD");
    await pull(s, "p/app", "v1", ALICE);
    await pull(s, "p/app", img.digest);

    await t.step("entries newest first with client and time; bounds echoed", async () => {
      const body = await pulls(s, "p/app", "?tag=v1");
      assert.deepEqual(Object.keys(body).sort(), [
        "entries",
        "max_age_secs",
        "max_pulls",
        "target",
      ]);
      assert.equal(body.target, "v1");
      assert.equal(body.max_pulls, 3);
      assert.equal(body.max_age_secs, 86400);
      assert.deepEqual(clients(body), ["alice", "anonymous", "anonymous"], "HEAD not recorded");
      for (const e of body.entries) {
        assert.deepEqual(Object.keys(e).sort(), ["at", "client"]);
        assert.match(e.at, RFC3339);
        assert.ok(Date.parse(e.at) >= since - 1000 && Date.parse(e.at) <= Date.now() + 1000);
      }
      const times = body.entries.map((e: { at: string }) => Date.parse(e.at));
      assert.deepEqual(times, [...times].sort((a, b) => b - a));
      const byDigest = await pulls(s, "p/app", `?digest=${img.digest}`);
      assert.equal(byDigest.target, img.digest);
      assert.deepEqual(clients(byDigest), ["anonymous"], "recorded against what it addressed");
    });

    await t.step("paging: n, offset, next (omitted on the last page)", async () => {
      const p1 = await pulls(s, "p/app", "?tag=v1&n=2");
      assert.deepEqual(clients(p1), ["alice", "anonymous"]);
      assert.equal(p1.next, 2);
      const p2 = await pulls(s, "p/app", `?tag=v1&n=2&offset=${p1.next}`);
      assert.deepEqual(clients(p2), ["anonymous"]);
      assert.equal("next" in p2, false);
      const exact = await pulls(s, "p/app", "?tag=v1&n=3");
      assert.equal(exact.entries.length, 3);
      assert.equal("next" in exact, false);
      const past = await pulls(s, "p/app", "?tag=v1&offset=10");
      assert.deepEqual(past.entries, []);
      assert.equal("next" in past, false);
      const mid = await pulls(s, "p/app", "?tag=v1&offset=1&n=1");
      assert.deepEqual(clients(mid), ["anonymous"]);
      assert.equal(mid.next, 2);
    });

    await t.step("a target never pulled is 200 with no entries (existence unchecked)", async () => {
      for (const q of ["?tag=never", `?digest=sha256:${"0".repeat(64)}`]) {
        const body = await pulls(s, "p/app", q);
        assert.deepEqual(body.entries, []);
      }
      const other = await pulls(s, "nowhere/at-all", "?tag=v1");
      assert.deepEqual(other.entries, []);
    });

    await t.step("missing, empty, ambiguous or unparseable target or page → 404", async () => {
      for (
        const q of [
          "",
          "?tag=",
          "?digest=",
          `?tag=v1&digest=${img.digest}`,
          "?tag=v1&tag=v2",
          "?tag=-bad",
          `?tag=${"t".repeat(129)}`,
          "?digest=sha256:abc",
          "?digest=md5:0123",
          "?tag=v1&n=x",
          "?tag=v1&n=-1",
          "?tag=v1&n=1.5",
          "?tag=v1&offset=",
          "?tag=v1&offset=-2",
          "?tag=v1&offset=1e3",
          "?tag=v1&n=1&n=2",
        ]
      ) {
        const r = await req(s, `/v2/p/app/_svc/pulls/list${q}`);
        const e = await assertErrorCode(r, 404, "NAME_UNKNOWN");
        assert.equal(typeof e.detail, "string", q);
      }
    });

    await t.step("revisions listing reports last_pulled_at, never for a referrer", async () => {
      const empty = new TextEncoder().encode("{}");
      const emptyDesc = { mediaType: OCI_EMPTY, digest: await sha256(empty), size: 2 };
      const ref = imageManifest(emptyDesc, [emptyDesc], {
        artifactType: "application/vnd.example.sig",
        subject: { mediaType: OCI_MANIFEST, digest: img.digest, size: img.body.length },
      });
      const refDigest = await sha256(ref);
      await putManifestOk(s, "p/app", refDigest, ref);
      await pull(s, "p/app", refDigest);
      const unpulled = await pushImage(s.url, "p/app", "v2");
      const r = await req(s, "/v2/p/app/_svc/revisions/list");
      assert.equal(r.status, 200);
      const rows = (await r.json()).manifests as Record<string, string>[];
      const by = new Map(rows.map((x) => [x.digest, x]));
      const main = by.get(img.digest)!;
      assert.match(main.last_pulled_at, RFC3339);
      const last = (await pulls(s, "p/app", "?tag=v1")).entries[0].at;
      const lastByDigest = (await pulls(s, "p/app", `?digest=${img.digest}`)).entries[0].at;
      assert.equal(main.last_pulled_at, [last, lastByDigest].sort().at(-1));
      assert.equal("last_pulled_at" in by.get(unpulled.digest)!, false, "never pulled");
      const leaf = by.get(refDigest)!;
      assert.equal("last_pulled_at" in leaf, false);
      assert.equal("pushed_at" in leaf, false);
      // The referrer's own pull is still in its history.
      assert.deepEqual(clients(await pulls(s, "p/app", `?digest=${refDigest}`)), ["anonymous"]);
    });
  });
});

Deno.test("SPEC §Pulls listing: update_pull_time off records nothing", serverTestOpts, async () => {
  await withServer({}, async (s) => {
    const img = await pushImage(s.url, "q/app", "v1");
    await pull(s, "q/app", "v1");
    await pull(s, "q/app", img.digest);
    const body = await pulls(s, "q/app", "?tag=v1");
    assert.deepEqual(body, { target: "v1", max_pulls: 1000, entries: [] });
    assert.deepEqual((await pulls(s, "q/app", `?digest=${img.digest}`)).entries, []);
    // Malformed queries are still refused.
    await assertErrorCode(await req(s, "/v2/q/app/_svc/pulls/list"), 404, "NAME_UNKNOWN");
    const rev = await req(s, "/v2/q/app/_svc/revisions/list");
    assert.equal(rev.status, 200);
    const rows = (await rev.json()).manifests as Record<string, unknown>[];
    assert.equal(rows.length, 1);
    assert.equal("last_pulled_at" in rows[0], false);
    assert.equal(typeof rows[0].pushed_at, "string");
    const ui = await req(s, "/v2/_svc/ui/config");
    assert.equal(ui.status, 200);
    assert.deepEqual(await ui.json(), { name: "Wharf" }, "no oidc without [ui.oidc]");
  });
});
