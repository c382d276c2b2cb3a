import assert from "node:assert/strict";
import { type Challenge, ChallengeSyntaxError, parseChallenges } from "./challenge.ts";

const c = (scheme: string, params: Record<string, string> = {}, token68?: string): Challenge =>
  token68 === undefined ? { scheme, params } : { scheme, params, token68 };

Deno.test("parseChallenges: RFC 7235 challenges as registries send them", () => {
  const cases: [string, Challenge[]][] = [
    ['Basic realm="Registry"', [c("basic", { realm: "Registry" })]],
    [
      'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",' +
      'scope="repository:library/alpine:pull"',
      [c("bearer", {
        realm: "https://auth.docker.io/token",
        service: "registry.docker.io",
        scope: "repository:library/alpine:pull",
      })],
    ],
    // case-insensitive scheme and names, token values, BWS around "="
    ["BEARER Realm = reg.example , Service=reg", [
      c("bearer", { realm: "reg.example", service: "reg" }),
    ]],
    // quoted strings with escapes and commas
    ['Basic realm="a \\"quoted\\", realm\\\\"', [c("basic", { realm: 'a "quoted", realm\\' })]],
    ['Bearer realm="",service=x', [c("bearer", { realm: "", service: "x" })]],
    // several challenges in one header
    ['Bearer realm="https://t/token", Basic realm="r"', [
      c("bearer", { realm: "https://t/token" }),
      c("basic", { realm: "r" }),
    ]],
    ['Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"', [
      c("newauth", { realm: "apps", type: "1", title: 'Login to "apps"' }),
      c("basic", { realm: "simple" }),
    ]],
    // a scheme alone, then another
    ["Negotiate, Basic realm=x", [c("negotiate"), c("basic", { realm: "x" })]],
    ["Negotiate", [c("negotiate")]],
    // token68
    ["Negotiate YWxhZGRpbjpvcGVuIHNlc2FtZQ==", [
      c("negotiate", {}, "YWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
    ]],
    ["Negotiate abc=, Basic realm=x", [c("negotiate", {}, "abc="), c("basic", { realm: "x" })]],
    // empty list elements and trailing commas
    [' , Basic realm="x" ,, ', [c("basic", { realm: "x" })]],
    ["Bearer , realm=x", [c("bearer", { realm: "x" })]],
    // valid syntax, though no usable Bearer challenge: a token68 `realm=`, a scheme `service`
    ["Bearer realm=", [c("bearer", {}, "realm=")]],
    ["Bearer realm=x, service", [c("bearer", { realm: "x" }), c("service")]],
  ];
  for (const [header, want] of cases) assert.deepEqual(parseChallenges(header), want, header);
});

Deno.test("parseChallenges: a parameter named like an Object.prototype member is a parameter", () => {
  const [ch] = parseChallenges("Basic __proto__=x, constructor=y");
  assert.deepEqual(Object.entries(ch.params), [["__proto__", "x"], ["constructor", "y"]]);
  assert.equal(Object.getPrototypeOf(ch.params), Object.prototype);
});

Deno.test("parseChallenges: malformed headers fail with ChallengeSyntaxError", () => {
  const cases: [string, RegExp][] = [
    ["", /no challenge/],
    [" , ", /no challenge/],
    ['Bearer realm="https://x/token', /unterminated quoted string/],
    ['Bearer realm="x\\', /unterminated quoted string/],
    ["Bearer realm=,service=x", /unexpected "="/],
    ['Bearer realm="a" service="b"', /unexpected "s" after realm/],
    ['Bearer realm="a",realm="b"', /duplicate parameter realm/],
    ['Bearer realm="a", =x', /expected an auth scheme/],
    ["Bearer realm=a=b", /unexpected "=" after realm/],
    ['"Bearer" realm=x', /expected an auth scheme, found "\\""/],
    ["Bearer@ realm=x", /unexpected "@" after the scheme/],
    ["Bearer realm=<x>", /expected a value for realm/],
    ["Basic realm=x; charset=utf-8", /unexpected ";" after realm/],
  ];
  for (const [header, want] of cases) {
    assert.throws(() => parseChallenges(header), (e: unknown) => {
      assert.ok(e instanceof ChallengeSyntaxError, `${header}: ${e}`);
      assert.match(e.message, want, header);
      assert.match(e.message, /^malformed WWW-Authenticate: .* at offset \d+$/);
      return true;
    });
  }
});
