// SPEC §Tags and §Catalog: tag list paging (n, last, Link), n=0 and invalid n, the empty list of
// a namespace with revisions but no tags, NAME_UNKNOWN without manifest content, catalog paging
// and the catalog membership rule of §States and transitions.
import assert from "node:assert/strict";
import { assertError, nextLink, req, serverTestOpts } from "../helpers/api.ts";
import { distinctManifest, putManifestOk } from "../helpers/oci_content.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";

const enc = new TextEncoder();

async function del(s: TestServer, ns: string, ref: string): Promise<void> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, { method: "DELETE" });
  const text = await r.text();
  assert.equal(r.status, 202, `DELETE ${ns}:${ref}: ${r.status} ${text}`);
}

interface Page {
  items: string[];
  link: string | null;
}

/** Follows Link from `first` until absent; returns every page (bounded against loops). */
async function walk(s: TestServer, first: string, key: "tags" | "repositories"): Promise<Page[]> {
  const pages: Page[] = [];
  let path: string | null = first;
  while (path !== null) {
    assert.ok(pages.length < 50, "Link chain does not end");
    const r = await req(s, path);
    assert.equal(r.status, 200, `GET ${path}`);
    const link = nextLink(r);
    const body = await r.json();
    assert.ok(Array.isArray(body[key]), JSON.stringify(body));
    pages.push({ items: body[key], link });
    path = link;
  }
  return pages;
}

const TAGS = ["0.9", "1.0", "1.1", "1.2-rc", "2.0", "_private", "alpha", "beta", "latest", "v2"];

Deno.test({
  name: "tag list and paging",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "tags/paged";
      const m = await distinctManifest("paged");
      // Pushed in reverse so that order of insertion cannot pass for sorted output.
      for (const tag of [...TAGS].reverse()) await putManifestOk(s, ns, tag, m.body);
      const sorted = [...TAGS].sort();

      await t.step("without n the whole list comes back sorted, without Link", async () => {
        const r = await req(s, `/v2/${ns}/tags/list`);
        assert.equal(r.status, 200);
        assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
        assert.equal(r.headers.get("link"), null);
        assert.deepEqual(await r.json(), { name: ns, tags: sorted });
      });

      await t.step("n=3 gives a first page of 3 and a Link carrying n and last", async () => {
        const r = await req(s, `/v2/${ns}/tags/list?n=3`);
        assert.equal(r.status, 200);
        const link = nextLink(r);
        assert.ok(link, "Link missing on a partial listing");
        const u = new URL(link, s.url);
        assert.equal(u.pathname, `/v2/${ns}/tags/list`);
        assert.equal(u.searchParams.get("n"), "3");
        assert.equal(u.searchParams.get("last"), sorted[2]);
        assert.deepEqual(await r.json(), { name: ns, tags: sorted.slice(0, 3) });
      });

      for (const n of [1, 3, 4, 9]) {
        await t.step(`following Link with n=${n} collects every tag in order`, async () => {
          const pages = await walk(s, `/v2/${ns}/tags/list?n=${n}`, "tags");
          for (const p of pages) assert.ok(p.items.length <= n, `page over n: ${p.items}`);
          // Every page but the last is full: the server stops early only when none remain.
          for (const p of pages.slice(0, -1)) assert.equal(p.items.length, n);
          assert.deepEqual(pages.flatMap((p) => p.items), sorted);
        });
      }

      await t.step("n equal to or above the count returns everything", async () => {
        for (const n of [TAGS.length, 100, 1000]) {
          const pages = await walk(s, `/v2/${ns}/tags/list?n=${n}`, "tags");
          assert.deepEqual(pages.flatMap((p) => p.items), sorted);
          assert.deepEqual(pages[0].items, sorted);
        }
      });

      await t.step("last alone lists the tags after it", async () => {
        const r = await req(s, `/v2/${ns}/tags/list?last=${encodeURIComponent(sorted[4])}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { name: ns, tags: sorted.slice(5) });
      });

      await t.step("last that is not itself a tag lists the tags sorting after it", async () => {
        const r = await req(s, `/v2/${ns}/tags/list?last=1.15`);
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { name: ns, tags: sorted.filter((x) => x > "1.15") });
      });

      await t.step("last after the final tag gives an empty list", async () => {
        const r = await req(s, `/v2/${ns}/tags/list?last=zzz`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("link"), null);
        assert.deepEqual(await r.json(), { name: ns, tags: [] });
      });

      await t.step("n=0 gives an empty list", async () => {
        const r = await req(s, `/v2/${ns}/tags/list?n=0`);
        assert.equal(r.status, 200);
        const body = await r.json();
        assert.equal(body.name, ns);
        assert.deepEqual(body.tags, []);
      });

      for (const bad of ["abc", "-1", "3x"]) {
        await t.step(`n=${JSON.stringify(bad)} is 400 UNSUPPORTED`, async () => {
          const r = await req(s, `/v2/${ns}/tags/list?n=${encodeURIComponent(bad)}`);
          await assertError(r, 400, "UNSUPPORTED");
        });
      }
    }),
});

Deno.test({
  name: "tag list of namespaces without tags or without manifests",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step("revisions but no tags: 200 with an empty list", async () => {
        const m = await distinctManifest("untagged");
        await putManifestOk(s, "tags/untagged", m.digest, m.body);
        const r = await req(s, "/v2/tags/untagged/tags/list");
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { name: "tags/untagged", tags: [] });
      });

      await t.step("every tag deleted, revision kept: 200 with an empty list", async () => {
        const m = await distinctManifest("detagged");
        await putManifestOk(s, "tags/detagged", "a", m.body);
        await putManifestOk(s, "tags/detagged", "b", m.body);
        await del(s, "tags/detagged", "a");
        await del(s, "tags/detagged", "b");
        const r = await req(s, "/v2/tags/detagged/tags/list");
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { name: "tags/detagged", tags: [] });
      });

      await t.step("a listed tag list reflects each later tag delete and move", async () => {
        const ns = "tags/cached";
        const m1 = await distinctManifest("cached-1");
        const m2 = await distinctManifest("cached-2");
        await putManifestOk(s, ns, "a", m1.body);
        await putManifestOk(s, ns, "b", m1.body);
        await putManifestOk(s, ns, "c", m2.body);
        const list = async () => (await (await req(s, `/v2/${ns}/tags/list`)).json()).tags;
        assert.deepEqual(await list(), ["a", "b", "c"]);
        await del(s, ns, "a");
        assert.deepEqual(await list(), ["b", "c"]);
        await putManifestOk(s, ns, "b", m2.body); // moves b
        assert.deepEqual(await list(), ["b", "c"]);
        await del(s, ns, m2.digest); // by digest: b and c go with the revision
        assert.deepEqual(await list(), []);
      });

      await t.step("an invalid namespace name is NAME_INVALID", async () => {
        await assertError(await req(s, "/v2/Upper/Case/tags/list"), 400, "NAME_INVALID");
        await assertError(await req(s, "/v2/trailing-/tags/list"), 400, "NAME_INVALID");
      });

      await t.step("a namespace never written is NAME_UNKNOWN", async () => {
        await assertError(await req(s, "/v2/tags/never/tags/list"), 404, "NAME_UNKNOWN");
      });

      await t.step("a namespace holding only blobs is NAME_UNKNOWN", async () => {
        await pushBlob(s.url, "tags/blobonly", enc.encode("only a blob"));
        await assertError(await req(s, "/v2/tags/blobonly/tags/list"), 404, "NAME_UNKNOWN");
      });

      await t.step("a namespace whose every revision was deleted is NAME_UNKNOWN", async () => {
        const m = await distinctManifest("gone");
        await putManifestOk(s, "tags/gone", "v1", m.body);
        await del(s, "tags/gone", m.digest);
        await assertError(await req(s, "/v2/tags/gone/tags/list"), 404, "NAME_UNKNOWN");
      });
    }),
});

Deno.test({
  name: "catalog paging and membership",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const names = ["cat/a", "cat/b/deep/er", "cat/c", "cat-d", "catz", "e", "zeta/one"];
      const digests = new Map<string, string>();
      for (const ns of [...names].reverse()) {
        const m = await distinctManifest(ns);
        await putManifestOk(s, ns, "v1", m.body);
        digests.set(ns, m.digest);
      }
      await pushBlob(s.url, "cat/blobonly", enc.encode("catalog blob only"));
      const sorted = [...names].sort();

      await t.step("the catalog lists every namespace holding content, sorted", async () => {
        const r = await req(s, "/v2/_catalog");
        assert.equal(r.status, 200);
        assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
        assert.equal(r.headers.get("link"), null);
        assert.deepEqual(await r.json(), { repositories: sorted });
      });

      await t.step("n=2 gives 2 names and a Link carrying n and last", async () => {
        const r = await req(s, "/v2/_catalog?n=2");
        assert.equal(r.status, 200);
        const link = nextLink(r);
        assert.ok(link, "Link missing on a partial catalog");
        const u = new URL(link, s.url);
        assert.equal(u.pathname, "/v2/_catalog");
        assert.equal(u.searchParams.get("n"), "2");
        assert.equal(u.searchParams.get("last"), sorted[1]);
        assert.deepEqual(await r.json(), { repositories: sorted.slice(0, 2) });
      });

      for (const n of [1, 2, 3, 7]) {
        await t.step(`following Link with n=${n} collects every name in order`, async () => {
          const pages = await walk(s, `/v2/_catalog?n=${n}`, "repositories");
          for (const p of pages) assert.ok(p.items.length <= n);
          for (const p of pages.slice(0, -1)) assert.equal(p.items.length, n);
          assert.deepEqual(pages.flatMap((p) => p.items), sorted);
        });
      }

      await t.step("last alone lists the names after it", async () => {
        const r = await req(s, `/v2/_catalog?last=${encodeURIComponent(sorted[2])}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { repositories: sorted.slice(3) });
      });

      await t.step("n=0 gives an empty catalog", async () => {
        const r = await req(s, "/v2/_catalog?n=0");
        assert.equal(r.status, 200);
        assert.deepEqual((await r.json()).repositories, []);
      });

      for (const bad of ["abc", "-1"]) {
        await t.step(`n=${bad} is 400 UNSUPPORTED`, async () => {
          await assertError(await req(s, `/v2/_catalog?n=${bad}`), 400, "UNSUPPORTED");
        });
      }

      const catalog = async (): Promise<string[]> => {
        const pages = await walk(s, "/v2/_catalog?n=3", "repositories");
        return pages.flatMap((p) => p.items);
      };

      await t.step("a namespace that lost its tags but holds a revision stays listed", async () => {
        await del(s, "cat/c", "v1");
        assert.deepEqual(await catalog(), sorted);
      });

      await t.step("a namespace holding only an untagged revision is listed", async () => {
        const m = await distinctManifest("untagged");
        await putManifestOk(s, "cat/untagged", m.digest, m.body);
        digests.set("cat/untagged", m.digest);
        assert.deepEqual(await catalog(), [...sorted, "cat/untagged"].sort());
      });

      await t.step("deleting every revision removes the namespace from the catalog", async () => {
        await del(s, "cat/c", digests.get("cat/c")!);
        await del(s, "cat/untagged", digests.get("cat/untagged")!);
        await del(s, "cat/a", digests.get("cat/a")!);
        const expected = sorted.filter((x) => x !== "cat/c" && x !== "cat/a");
        assert.deepEqual(await catalog(), expected);
        const r = await req(s, "/v2/_catalog");
        assert.deepEqual(await r.json(), { repositories: expected });
      });

      await t.step("a namespace with two revisions stays until the last goes", async () => {
        const second = await distinctManifest("second");
        await putManifestOk(s, "e", "v2", second.body);
        await del(s, "e", digests.get("e")!);
        assert.ok((await catalog()).includes("e"));
        await del(s, "e", second.digest);
        assert.ok(!(await catalog()).includes("e"));
      });

      await t.step("pushing again brings a namespace back", async () => {
        const m = await distinctManifest("back");
        await putManifestOk(s, "cat/a", "v1", m.body);
        assert.ok((await catalog()).includes("cat/a"));
      });
    }),
});
