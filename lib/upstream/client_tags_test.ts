// UpstreamClient.listTags against a small local registry of tag pages: Link pagination on the
// upstream's origin, distribution's `"tags": null`, Docker Hub's rate-limit headers, and the
// pages that must fail the whole listing (a loop, another origin, not JSON, an invalid tag).
import assert from "node:assert/strict";
import { upstreamConfig } from "../../tests/helpers/fake_registry.ts";
import { upstreamError } from "../../tests/helpers/upstream_client.ts";
import { UpstreamClient } from "./client.ts";

type Page = (url: URL) => Response;

async function withPages(page: Page, f: (c: UpstreamClient) => Promise<void>): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const url = new URL(req.url);
    if (url.pathname !== "/v2/team/app/tags/list") return new Response("no", { status: 404 });
    return page(url);
  });
  const c = new UpstreamClient(upstreamConfig(`http://127.0.0.1:${server.addr.port}`));
  try {
    await f(c);
  } finally {
    c.close();
    await server.shutdown();
  }
}

Deno.test("listTags: follows Link pages, keeps the last rate-limit hint", async () => {
  await withPages((url) => {
    const last = url.searchParams.get("last");
    if (last === null) {
      return Response.json({ name: "team/app", tags: ["a", "b"] }, {
        headers: {
          link: '</v2/team/app/tags/list?n=2&last=b>; rel="next"',
          "ratelimit-remaining": "99;w=21600",
        },
      });
    }
    return Response.json({ name: "team/app", tags: ["c"] }, {
      headers: { "ratelimit-remaining": "98;w=21600", "ratelimit-reset": "60" },
    });
  }, async (c) => {
    assert.deepEqual(await c.listTags("team/app"), {
      tags: ["a", "b", "c"],
      rateLimit: { remaining: 98, resetSecs: 60 },
    });
  });
  await withPages(() => Response.json({ name: "team/app", tags: null }), async (c) => {
    assert.deepEqual((await c.listTags("team/app")).tags, []);
  });
});

Deno.test("listTags: a looping, foreign, non-JSON or invalid page fails the whole listing", async () => {
  const cases: [Page, RegExp][] = [
    [() =>
      Response.json({ tags: ["a"] }, {
        headers: { link: '</v2/team/app/tags/list?n=1000>; rel="next"' },
      }), /pagination loops/],
    [() =>
      Response.json({ tags: ["a"] }, {
        headers: { link: '<http://example.invalid/v2/team/app/tags/list>; rel="next"' },
      }), /another origin/],
    [() => new Response("<html>hello</html>", { status: 200 }), /not JSON/],
    [() => Response.json({ tags: ["ok", "../etc"] }), /tags\[1\] is not a valid tag/],
    [() => Response.json({ tags: "v1" }), /"tags" is not an array/],
  ];
  for (const [page, message] of cases) {
    await withPages(page, async (c) => {
      await assert.rejects(c.listTags("team/app"), upstreamError("invalid", message));
    });
  }
});
