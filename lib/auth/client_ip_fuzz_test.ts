// Property fuzzing of the client IP and origin a request is judged by: X-Forwarded-For counts
// only behind a trusted proxy and only right to left, X-Forwarded-Host/-Proto only from a trusted
// proxy, `Forwarded` (RFC 7239) not at all; whatever a client writes, the answer is a valid IP
// and an origin that cannot break out of the WWW-Authenticate realm it is echoed into.
import assert from "node:assert/strict";
import { ClientIpResolver } from "./client_ip.ts";
import { assertLinear, FAST_MS, fc, fuzzParams, withinSync } from "../../tests/helpers/fuzz.ts";

const V4_OCTET = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|0?\\d?\\d)";
const V4 = new RegExp(`^${V4_OCTET}(?:\\.${V4_OCTET}){3}$`);

/** An IP literal by the WHATWG URL parser, independent of the resolver's own parser. */
function isIp(s: string): boolean {
  if (V4.test(s)) return true;
  if (!s.includes(":")) return false;
  try {
    return new URL(`http://[${s}]/`).hostname.startsWith("[");
  } catch {
    return false;
  }
}

const v4 = fc.ipV4();
const v6 = fc.ipV6();
const ip = fc.oneof(v4, v6, v4.map((a) => `::ffff:${a}`));
/** trusted proxy entries: single addresses and networks of any prefix */
const trustedNet = fc.oneof(
  ip,
  fc.tuple(v4, fc.integer({ min: 0, max: 32 })).map(([a, b]) => `${a}/${b}`),
  fc.tuple(v6, fc.integer({ min: 0, max: 128 })).map(([a, b]) => `${a}/${b}`),
);
/** what a client may write into X-Forwarded-For: addresses, near misses and junk */
const hop = fc.oneof(
  ip,
  ip.map((a) => `[${a}]`),
  ip.map((a) => ` ${a} `),
  fc.ipV4Extended(),
  fc.constantFrom(
    "unknown",
    "",
    "1.2.3.4:80",
    "[::1]:80",
    "1:2:3:4:5:6:7:8::",
    "::1:2:3:4:5:6:7:8",
    "::ffff:999.1.1.1",
    "fe80::1%eth0",
    "256.1.1.1",
    "1.2.3",
    "_",
    "[[::1]]",
  ),
  fc.string({ maxLength: 20 }),
);

Deno.test("fuzz client ip: an untrusted peer's forwarding headers change nothing", () => {
  fc.assert(
    fc.property(
      fc.array(trustedNet, { maxLength: 4 }),
      ip,
      fc.option(fc.string({ maxLength: 200 }), { nil: null }),
      (nets, peer, xff) => {
        const r = new ClientIpResolver(nets);
        const trusted = r.resolve(peer, "203.0.113.250") !== peer;
        fc.pre(!trusted);
        assert.equal(r.resolve(peer, xff), peer);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz client ip: behind trusted proxies, a forged prefix never wins", () => {
  fc.assert(
    fc.property(
      fc.array(trustedNet, { minLength: 1, maxLength: 4 }),
      fc.string({ maxLength: 100 }),
      ip,
      fc.array(ip, { maxLength: 3 }),
      fc.boolean(),
      (nets, forged, client, proxies, bracket) => {
        const r = new ClientIpResolver(nets);
        const isTrusted = (a: string) => r.resolve(a, "203.0.113.250") !== a;
        // the peer and the proxies between are trusted; the client is not
        const peer = [...proxies].reverse().find(isTrusted) ?? nets[0].split("/")[0];
        fc.pre(isTrusted(peer) && !isTrusted(client));
        const chain = proxies.filter(isTrusted);
        const xff = [forged, bracket ? `[${client}]` : client, ...chain].join(", ");
        assert.equal(r.resolve(peer, xff), client, xff);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz client ip: the client ip is always the peer or a valid IP", () => {
  fc.assert(
    fc.property(
      fc.array(trustedNet, { maxLength: 4 }),
      ip,
      fc.oneof(
        fc.array(hop, { maxLength: 6 }).map((hs) => hs.join(",")),
        fc.string({ maxLength: 100 }),
      ),
      (nets, peer, xff) => {
        const r = new ClientIpResolver([...nets, peer]); // the peer is a trusted proxy
        const got = withinSync(FAST_MS, "resolve", () => r.resolve(peer, xff));
        assert.ok(got === peer || isIp(got), JSON.stringify([xff, got]));
      },
    ),
    fuzzParams(),
  );
});

// A header value as HTTP carries it: no CR, LF or NUL, Latin-1, no surrounding whitespace.
const headerValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.domain(),
  fc.tuple(fc.domain(), fc.nat(70000)).map(([d, p]) => `${d}:${p}`),
  ip.map((a) => `[${a}]`),
  fc.constantFrom(
    'evil.example", realm="x',
    "a b",
    "http://evil.example",
    "evil.example/path",
    "user@evil.example",
    "evil.example, other.example",
    "https",
    "HTTPS",
    "gopher",
  ),
).filter((v) => {
  try {
    new Headers({ x: v });
    return /^[\x21-\xff](?:[\x20-\xff]*[\x21-\xff])?$/.test(v);
  } catch {
    return false;
  }
});

Deno.test("fuzz origin: only a trusted proxy's forwarded host counts, and it stays a plain origin", () => {
  fc.assert(
    fc.property(
      fc.array(trustedNet, { maxLength: 3 }),
      ip,
      fc.boolean(),
      fc.constantFrom("http://registry.example/v2/", "https://registry.example:5000/v2/x"),
      fc.record({
        host: fc.option(headerValue, { nil: undefined }),
        "x-forwarded-host": fc.option(headerValue, { nil: undefined }),
        "x-forwarded-proto": fc.option(headerValue, { nil: undefined }),
        forwarded: fc.option(headerValue, { nil: undefined }),
      }),
      (nets, peer, trustPeer, url, h) => {
        const r = new ClientIpResolver(trustPeer ? [...nets, peer] : nets);
        const headers = new Headers();
        for (const [k, v] of Object.entries(h)) if (v !== undefined) headers.set(k, v);
        const got = r.origin(peer, url, headers);
        if (got !== null) {
          // nothing that could end the realm's quoted string or add a header or a path
          assert.match(got, /^https?:\/\/[a-z0-9.:\[\]-]+$/, got);
        }
        // RFC 7239's Forwarded is not read: it changes nothing
        const without = new Headers(headers);
        without.delete("forwarded");
        assert.equal(r.origin(peer, url, without), got);
        if (r.resolve(peer, "203.0.113.250") === peer) {
          // an untrusted peer: X-Forwarded-* are ignored
          const plain = new Headers(without);
          plain.delete("x-forwarded-host");
          plain.delete("x-forwarded-proto");
          assert.equal(r.origin(peer, url, plain), got);
        }
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz client ip: a megabyte X-Forwarded-For resolves in linear time", async () => {
  const r = new ClientIpResolver(["10.0.0.0/8", "fd00::/8", "192.0.2.1"]);
  const shapes: [string, (n: number) => string][] = [
    ["trusted hops", (n) => "10.1.2.3, ".repeat(n / 10)],
    ["v6 hops", (n) => "fd00::1,".repeat(n / 8)],
    ["commas", (n) => ",".repeat(n)],
    ["colons", (n) => ":".repeat(n)],
    ["digits", (n) => "1".repeat(n)],
    ["spaces", (n) => " ".repeat(n) + "1.2.3.4"],
  ];
  for (const [what, make] of shapes) {
    await assertLinear(`X-Forwarded-For ${what}`, make, (s) => r.resolve("10.0.0.1", s));
  }
});

Deno.test("fuzz client ip: regressions", () => {
  const r = new ClientIpResolver(["10.0.0.0/8", "::1"]);
  // all hops trusted: the first hop, without the brackets some proxies write
  assert.equal(r.resolve("10.0.0.1", "[::1], 10.0.0.2"), "::1");
  // nine groups are not an IPv6 address, however the `::` is placed
  assert.equal(r.resolve("10.0.0.1", "1:2:3:4:5:6:7:8::"), "0.0.0.0", "unreadable: unknown");
  assert.equal(r.resolve("10.0.0.1", "::1:2:3:4:5:6:7:8"), "0.0.0.0");
  assert.equal(r.resolve("10.0.0.1", "1:2:3:4::5:6:7:8"), "0.0.0.0");
  assert.equal(r.resolve("10.0.0.1", "1:2:3::4:5:6:7"), "1:2:3::4:5:6:7");
  // IPv6 with its last 32 bits as IPv4 (NAT64) is an address, not garbage that makes the client
  // the proxy
  assert.equal(r.resolve("10.0.0.1", "64:ff9b::192.0.2.1, 10.0.0.2"), "64:ff9b::192.0.2.1");
  assert.equal(r.resolve("10.0.0.1", "::192.0.2.1"), "::192.0.2.1");
  assert.equal(r.resolve("10.0.0.1", "::ffff:999.0.2.1"), "0.0.0.0");
  assert.equal(r.resolve("10.0.0.1", "1:2:3:4:5:6:7:1.2.3.4"), "0.0.0.0");
  // an IPv4-mapped address is its IPv4 address, however it is spelled
  for (const mapped of ["::ffff:10.1.2.3", "::FFFF:10.1.2.3", "0:0:0:0:0:ffff:a01:203"]) {
    assert.equal(r.resolve(mapped, "1.2.3.4"), "1.2.3.4", mapped);
    assert.equal(r.resolve("10.0.0.1", `1.2.3.4, ${mapped}`), "1.2.3.4", mapped);
  }
});
