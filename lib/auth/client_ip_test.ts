import assert from "node:assert/strict";
import { ClientIpResolver } from "./client_ip.ts";

Deno.test("X-Forwarded-For counts only behind a trusted proxy, walked right to left", () => {
  const r = new ClientIpResolver(["10.0.0.0/8", "::1", "fd00::/8"]);
  assert.equal(
    r.resolve("203.0.113.9", "1.2.3.4"),
    "203.0.113.9",
    "untrusted peer: header ignored",
  );
  assert.equal(r.resolve("10.1.2.3", "1.2.3.4"), "1.2.3.4");
  assert.equal(
    r.resolve("10.1.2.3", "6.6.6.6, 1.2.3.4, 10.9.9.9"),
    "1.2.3.4",
    "spoofed left entries ignored",
  );
  assert.equal(r.resolve("::1", "2001:db8::7"), "2001:db8::7");
  assert.equal(
    r.resolve("fd12::1", "10.0.0.5, 10.0.0.6"),
    "10.0.0.5",
    "all trusted: the first hop",
  );
  assert.equal(r.resolve("10.1.2.3", "not-an-ip"), "0.0.0.0", "unreadable: the client is unknown");
  assert.equal(r.resolve("::ffff:10.1.2.3", "5.6.7.8"), "5.6.7.8", "IPv4-mapped peer");
  assert.equal(r.resolve("10.1.2.3", null), "10.1.2.3");
  assert.equal(new ClientIpResolver([]).resolve("10.1.2.3", "1.2.3.4"), "10.1.2.3");
  assert.equal(new ClientIpResolver(["127.0.0.1"]).resolve("127.0.0.2", "1.2.3.4"), "127.0.0.2");
});

Deno.test("client ip: an unreadable entry leaves the client unknown, never the trusted proxy", () => {
  const r = new ClientIpResolver(["10.0.0.0/8"]);
  assert.equal(r.resolve("10.0.0.5", "unknown"), "0.0.0.0");
  assert.equal(r.resolve("10.0.0.5", "5.6.7.8, unknown"), "0.0.0.0");
  assert.equal(r.resolve("10.0.0.5", "unknown, 10.0.0.9"), "0.0.0.0");
  // a gateway's port is not an unreadable address
  assert.equal(r.resolve("10.0.0.5", "203.0.113.7:5678"), "203.0.113.7");
  assert.equal(r.resolve("10.0.0.5", "[2001:db8::1]:5678"), "2001:db8::1");
  assert.equal(r.resolve("10.0.0.5", "203.0.113.7:5678, 10.0.0.9:443"), "203.0.113.7");
  assert.equal(r.resolve("10.0.0.5", "2001:db8::1"), "2001:db8::1");
});
