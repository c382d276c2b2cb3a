import assert from "node:assert/strict";
import { Query } from "./query.ts";
import { RegistryError } from "../lib/oci/mod.ts";

const q = (s: string) => new Query(new URLSearchParams(s));

function refused(f: () => unknown, code: string, detail: string, status?: number): void {
  assert.throws(f, (e) => {
    assert.ok(e instanceof RegistryError);
    assert.equal(e.code, code);
    assert.equal(e.detail, detail);
    if (status !== undefined) assert.equal(e.status, status);
    return true;
  });
}

Deno.test("strict by default: a repeated parameter is 404 NAME_UNKNOWN", () => {
  assert.equal(q("a=1").one("a"), "1");
  assert.equal(q("").one("a"), null);
  refused(() => q("a=1&a=2").one("a"), "NAME_UNKNOWN", "a given more than once", 404);
  refused(() => q("x=1&b=1&b=2").atMostOnce(["x", "b"]), "NAME_UNKNOWN", "b given more than once");
  assert.equal(q("a=1&a=2").first("a"), "1");
  assert.deepEqual(q("t=x&t=y").all("t"), ["x", "y"]);
  assert.ok(q("download").has("download"));
});

Deno.test("refusing: another error, and first-wins when not strict", () => {
  const oci = q("n=5&n=x").refusing((d) => new RegistryError("UNSUPPORTED", d), false);
  assert.equal(oci.count("n", -1, { digits: 9 }), 5);
  refused(
    () => q("n=x").refusing((d) => new RegistryError("UNSUPPORTED", d)).count("n", 0),
    "UNSUPPORTED",
    "n must be a non-negative integer",
    400,
  );
});

Deno.test("count: digits, minimum, cap and fallback", () => {
  assert.equal(q("").count("n", 100), 100);
  assert.equal(q("").count("n", null), null);
  assert.equal(q("n=0").count("n", 100), 0);
  assert.equal(q("n=123456789012345").count("n", 0), 123456789012345);
  refused(
    () => q("n=1234567890123456").count("n", 0),
    "NAME_UNKNOWN",
    "n must be a non-negative integer",
  );
  refused(() => q("n=-1").count("n", 0), "NAME_UNKNOWN", "n must be a non-negative integer");
  refused(() => q("n=1e3").count("n", 0), "NAME_UNKNOWN", "n must be a non-negative integer");
  refused(() => q("n=").count("n", 0), "NAME_UNKNOWN", "n must be a non-negative integer");
  refused(
    () => q("n=1234567890").count("n", 0, { digits: 9 }),
    "NAME_UNKNOWN",
    "n must be a non-negative integer",
  );
  refused(() => q("n=0").count("n", 1, { min: 1 }), "NAME_UNKNOWN", "n must be a positive integer");
  assert.equal(q("n=5000").count("n", 100, { max: 1000 }), 1000);
});

Deno.test("matching and only", () => {
  assert.equal(q("a=abc").matching("a", /^[a-c]+$/, "letters"), "abc");
  assert.equal(q("").matching("a", /^x$/, "x"), null);
  refused(
    () => q("a=abd").matching("a", /^[a-c]+$/, "letters"),
    "NAME_UNKNOWN",
    "a is not letters: abd",
  );
  q("a=1").only(["a"]);
  refused(() => q("a=1&zz=2").only(["a"]), "NAME_UNKNOWN", "unknown parameter zz");
  refused(() => q("x").only([]), "NAME_UNKNOWN", "unknown parameter x");
});
