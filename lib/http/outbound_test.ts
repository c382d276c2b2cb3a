import assert from "node:assert/strict";
import fc from "fast-check";
import { fuzzParams } from "../../tests/helpers/fuzz.ts";
import {
  classifyAddress,
  formatIp,
  OutboundGuard,
  OutboundRefused,
  parseCidr,
  parseIp,
  type Resolver,
} from "./outbound.ts";

Deno.test("classifyAddress: every spelling of the refused classes", () => {
  const cases: [string, string | null][] = [
    ["169.254.169.254", "metadata"],
    ["2852039166", "metadata"], // decimal
    ["0xa9fea9fe", "metadata"], // hex
    ["0251.0376.0251.0376", "metadata"], // octal
    ["0xa9.0xfe.0xa9.0xfe", "metadata"],
    ["169.254.43518", "metadata"], // a.b.c16
    ["169.16689662", "metadata"], // a.b24
    ["169.254.169.254.", "metadata"],
    ["::ffff:169.254.169.254", "metadata"], // IPv4-mapped
    ["[::ffff:a9fe:a9fe]", "metadata"],
    ["::ffff:0:169.254.169.254", "metadata"], // IPv4-translated
    ["::169.254.169.254", "metadata"], // IPv4-compatible
    ["64:ff9b::169.254.169.254", "metadata"], // NAT64
    ["2002:a9fe:a9fe::1", "metadata"], // 6to4
    ["fd00:ec2::254", "metadata"],
    ["[FD00:EC2:0:0:0:0:0:254]", "metadata"],
    ["100.100.100.200", "metadata"],
    ["169.254.10.1", "link-local"],
    ["fe80::1", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["::ffff:169.254.0.1", "link-local"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["2130706433", "loopback"],
    ["0x7f.1", "loopback"],
    ["017700000001", "loopback"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:2", "loopback"],
    ["0.0.0.0", "unspecified"],
    ["0", "unspecified"],
    ["::", "unspecified"],
    ["::ffff:0.0.0.0", "unspecified"],
    // ordinary
    ["10.0.0.1", null],
    ["192.168.1.1", null],
    ["172.16.0.1", null],
    ["8.8.8.8", null],
    ["169.253.255.255", null],
    ["169.255.0.0", null],
    ["fec0::1", null],
    ["fd00:ec2::253", null],
    ["fd00::1", null],
    ["2001:db8::1", null],
    ["::ffff:8.8.8.8", null],
    // not addresses
    ["localhost", null],
    ["registry-1.docker.io", null],
    ["1.2.3.4.5", null],
    ["08.1.1.1", null],
    ["256.1.1.1", null],
    ["1:2:3:4:5:6:7:8:9", null],
    ["::1::", null],
    ["", null],
  ];
  for (const [ip, cls] of cases) assert.equal(classifyAddress(ip), cls, ip);
});

Deno.test("parseIp agrees with the URL parser on IPv4 hosts", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2 ** 32 - 1 }),
      fc.constantFrom("dec", "hex", "oct", "dotted", "two", "three"),
      (n, form) => {
        const o = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
        const host = form === "dec"
          ? String(n)
          : form === "hex"
          ? `0x${n.toString(16)}`
          : form === "oct"
          ? `0${n.toString(8)}`
          : form === "dotted"
          ? o.map((x) => `0x${x.toString(16)}`).join(".")
          : form === "two"
          ? `${o[0]}.${n & 0xffffff}`
          : `0${o[0].toString(8)}.${o[1]}.${n & 0xffff}`;
        const canonical = new URL(`http://${host}/`).hostname;
        const parsed = parseIp(host);
        assert.ok(parsed, host);
        assert.equal(formatIp(parsed), canonical, host);
        assert.equal(classifyAddress(host), classifyAddress(canonical));
      },
    ),
    fuzzParams(),
  );
});

Deno.test("parseIp: IPv6 round-trips through the URL parser's spelling", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }),
      (g) => {
        const full = g.map((x) => x.toString(16)).join(":");
        const canonical = new URL(`http://[${full}]/`).hostname.slice(1, -1);
        const parsed = parseIp(full);
        assert.ok(parsed);
        assert.deepEqual(parseIp(canonical), parsed);
        assert.equal(formatIp(parsed), canonical);
        // a mapped address is judged as the IPv4 address it reaches
        const v4 = `${g[0] & 255}.${g[1] & 255}.${g[2] & 255}.${g[3] & 255}`;
        assert.equal(classifyAddress(`::ffff:${v4}`), classifyAddress(v4));
      },
    ),
    fuzzParams(),
  );
});

Deno.test("parseIp never throws on arbitrary strings", () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 80 }), (s) => {
      const b = parseIp(s);
      assert.ok(b === null || b.length === 4 || b.length === 16);
      classifyAddress(s);
      parseCidr(s);
    }),
    fuzzParams(),
  );
});

Deno.test("parseCidr", () => {
  assert.deepEqual(parseCidr("169.254.10.0/24"), { bytes: parseIp("169.254.10.0"), bits: 24 });
  assert.deepEqual(parseCidr("::1"), { bytes: parseIp("::1"), bits: 128 });
  for (const bad of ["1.2.3.4/33", "::/129", "x/8", "1.2.3.4/8/8", "1.2.3.4/-1"]) {
    assert.equal(parseCidr(bad), null, bad);
  }
});

const noDns: Resolver = () => {
  throw new Error("no DNS in this test");
};

async function verdict(g: OutboundGuard, url: string): Promise<string | null> {
  try {
    await g.check(new URL(url));
    return null;
  } catch (e) {
    assert.ok(e instanceof OutboundRefused, String(e));
    assert.equal(g.refusalOf(new URL(url))?.message ?? e.message, e.message);
    return e.addressClass ?? e.reason;
  }
}

Deno.test("guard: a remote upstream can send Wharf to no refused class", async () => {
  const g = new OutboundGuard({ configured: ["https://registry.example"], resolve: noDns });
  assert.equal(await verdict(g, "http://169.254.169.254/latest/meta-data/"), "metadata");
  assert.equal(await verdict(g, "http://2852039166/"), "metadata");
  assert.equal(await verdict(g, "http://[fd00:ec2::254]/"), "metadata");
  assert.equal(await verdict(g, "http://[::ffff:169.254.169.254]/"), "metadata");
  assert.equal(await verdict(g, "http://169.254.1.1:8080/"), "link-local");
  assert.equal(await verdict(g, "http://[fe80::1]/"), "link-local");
  assert.equal(await verdict(g, "http://127.0.0.1:2375/"), "loopback");
  assert.equal(await verdict(g, "http://127.0.0.2/"), "loopback");
  assert.equal(await verdict(g, "http://[::1]/"), "loopback");
  assert.equal(await verdict(g, "http://localhost/"), "loopback");
  assert.equal(await verdict(g, "http://LOCALHOST./"), "loopback");
  assert.equal(await verdict(g, "http://x.localhost/"), "loopback");
  assert.equal(await verdict(g, "http://0.0.0.0/"), "unspecified");
  assert.equal(await verdict(g, "http://[::]/"), "unspecified");
  assert.match(String(await verdict(g, "file:///etc/passwd")), /not http/);
  // the configured host itself, and ordinary addresses, pass without any DNS
  assert.equal(await verdict(g, "https://REGISTRY.example./v2/"), null);
  assert.equal(await verdict(g, "http://10.1.2.3/"), null);
  assert.equal(await verdict(g, "http://[2001:db8::1]/"), null);
});

Deno.test("guard: a name counts as the addresses it resolves to, every one of them", async () => {
  const dns: Record<string, string[]> = {
    "cdn.example": ["93.184.216.34", "2606:2800:220:1::1"],
    "evil.example": ["93.184.216.34", "169.254.169.254"],
    "mapped.example": ["::ffff:a9fe:a9fe"],
    "home.example": ["127.0.0.1"],
    "nx.example": [],
  };
  const asked: string[] = [];
  const resolve: Resolver = (h) => {
    asked.push(h);
    return Promise.resolve(dns[h] ?? []);
  };
  const g = new OutboundGuard({ configured: ["https://registry.example"], resolve });
  assert.equal(await verdict(g, "https://cdn.example/blob?X-Amz-Signature=s"), null);
  assert.equal(await verdict(g, "https://evil.example/"), "metadata");
  assert.equal(await verdict(g, "https://mapped.example/"), "metadata");
  assert.equal(await verdict(g, "https://home.example/"), "loopback");
  assert.match(String(await verdict(g, "https://nx.example/")), /resolves to no address/);
  assert.deepEqual(asked, [
    "cdn.example",
    "evil.example",
    "mapped.example",
    "home.example",
    "nx.example",
  ]);
  const e = await g.check(new URL("https://evil.example/x?sig=secret")).catch((e) => e);
  assert.match(
    e.message,
    /^https:\/\/evil\.example\/x refused: evil\.example \(169\.254\.169\.254\)/,
  );
  assert.doesNotMatch(e.message, /secret/);
});

Deno.test("guard: loopback stays reachable when the config itself is on loopback", async () => {
  for (const configured of ["http://127.0.0.1:5000", "http://localhost:5000", "http://[::1]:1"]) {
    const g = new OutboundGuard({ configured: [configured], resolve: noDns });
    assert.equal(await verdict(g, "http://127.0.0.1:9999/"), null, configured);
    assert.equal(await verdict(g, "http://localhost:9999/"), null, configured);
    assert.equal(await verdict(g, "http://127.0.0.2/"), null, configured);
    assert.equal(await verdict(g, "http://169.254.169.254/"), "metadata", configured);
    assert.equal(await verdict(g, "http://[fd00:ec2::254]/"), "metadata", configured);
    assert.equal(await verdict(g, "http://0.0.0.0:9999/"), "unspecified", configured);
  }
});

Deno.test("guard: [global] outbound_allow opens the addresses it lists", async () => {
  const g = new OutboundGuard({
    configured: ["https://registry.example"],
    allow: ["169.254.10.0/24", "127.0.0.1", "fe80::/10", "not an address"],
    resolve: noDns,
  });
  assert.equal(await verdict(g, "http://169.254.10.7/"), null);
  assert.equal(await verdict(g, "http://[::ffff:169.254.10.7]/"), null);
  assert.equal(await verdict(g, "http://[fe80::9]/"), null);
  assert.equal(await verdict(g, "http://127.0.0.1:5000/"), null);
  assert.equal(await verdict(g, "http://169.254.11.7/"), "link-local");
  assert.equal(await verdict(g, "http://169.254.169.254/"), "metadata");
  assert.equal(await verdict(g, "http://127.0.0.2/"), "loopback");
  // localhost is 127.0.0.1 and ::1: both must be allowed
  assert.equal(await verdict(g, "http://localhost/"), "loopback");
});
