// Property fuzzing of an upstream's `Link` pagination: whatever the header says, the next page
// is on the upstream's own origin (a page elsewhere would take our token along) or the listing
// fails with UpstreamError, never another error.
import assert from "node:assert/strict";
import { nextPage } from "./referrers.ts";
import { Transport } from "./transport.ts";
import { UpstreamError } from "./errors.ts";
import { expectOnly, FAST_MS, fc, fuzzParams, withinSync } from "../../tests/helpers/fuzz.ts";
import type { Exchange } from "./transport.ts";

const ORIGIN = "https://up.example";
const t = new Transport({
  upstream: ORIGIN,
  connectTimeoutMs: 1000,
  readTimeoutMs: 1000,
  maxRedirects: 0,
});
const answered = new URL(`${ORIGIN}/v2/library/alpine/tags/list?n=100`);

function exchange(link: string): Exchange | null {
  let headers: Headers;
  try {
    headers = new Headers({ link });
  } catch {
    return null; // not a header value HTTP can carry
  }
  return {
    response: new Response(null, { headers }),
    url: answered,
    body: () => new ReadableStream(),
    discard: () => Promise.resolve(),
  };
}

/** URL-ish targets, many of them a scheme, host or port away from the upstream */
const target = fc.oneof(
  fc.constantFrom(
    "https://evil.example/v2/x",
    "//evil.example/v2/x",
    "\\\\evil.example/v2/x",
    "/\\evil.example/v2/x",
    "http://up.example/v2/x",
    "https://up.example:444/v2/x",
    "https://up.example.evil/v2/x",
    "https://user@up.example/v2/x",
    "https://up.example@evil.example/",
    "HTTPS://UP.EXAMPLE/v2/x",
    "https://up.example./v2/x",
    "https:evil.example",
    "javascript:alert(1)",
    "data:,x",
    "/v2/library/alpine/tags/list?last=3&n=100",
    "?last=3",
    "",
    "https://[::1]/",
    "https://up.example:443/v2/x",
  ),
  fc.webUrl({ withQueryParameters: true }),
  fc.webPath(),
  fc.string({ maxLength: 40 }).filter((s) => !s.includes(">")),
);

Deno.test("fuzz next page: followed only on the upstream's origin, refused elsewhere", () => {
  fc.assert(
    fc.property(
      target,
      fc.constantFrom('rel="next"', "rel=next", 'rel="prev next"'),
      (to, rel) => {
        const ex = exchange(`<${to}>; ${rel}`);
        fc.pre(ex !== null);
        let resolved: URL | null = null;
        try {
          resolved = new URL(to, answered);
        } catch { /* refused below */ }
        let next: URL | null = null;
        let refused: unknown = null;
        try {
          next = nextPage(t, ex!, ORIGIN, "GET tags");
        } catch (e) {
          refused = e;
        }
        if (resolved !== null && resolved.origin === ORIGIN) {
          assert.equal(next?.href, resolved.href, `${to}: ${refused}`);
        } else {
          expectOnly(refused, UpstreamError);
          assert.equal((refused as UpstreamError).kind, "invalid");
        }
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz next page: any Link header is read fast, never followed off the origin", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ maxLength: 200 }),
        fc.array(
          fc.tuple(target, fc.constantFrom("rel=next", "rel=prev", "", 'rel="next"; x="<>"')),
          { maxLength: 4 },
        ).map((ls) => ls.map(([u, r]) => `<${u}>; ${r}`).join(", ")),
      ),
      (h) => {
        const ex = exchange(h);
        fc.pre(ex !== null);
        try {
          const next = withinSync(FAST_MS, "nextPage", () => nextPage(t, ex!, ORIGIN, "GET tags"));
          if (next !== null) assert.equal(next.origin, ORIGIN);
        } catch (e) {
          expectOnly(e, UpstreamError);
        }
      },
    ),
    fuzzParams(),
  );
});
