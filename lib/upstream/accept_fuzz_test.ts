// Property fuzzing of the `Accept` header a client sends for a manifest (SPEC: ordered by q before
// a pull-through request forwards it): any header parses without throwing, in linear time, to
// items ordered stably by q, and what is forwarded reads back as the same list.
import assert from "node:assert/strict";
import { DEFAULT_MANIFEST_ACCEPT, forwardAccept, parseAccept } from "./accept.ts";
import {
  assertLinear,
  FAST_MS,
  fc,
  fuzzParams,
  mutatedText,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
/** RFC 9110 §12.4.2 qvalue */
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
const mediaRange = fc.oneof(
  fc.tuple(token, token).map(([a, b]) => `${a}/${b}`),
  fc.constantFrom(
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "*/*",
  ),
);
/** q values of any shape: RFC ones, near misses and junk */
const qValue = fc.oneof(
  fc.stringMatching(/^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/),
  fc.constantFrom("", ".5", "1.001", "0.1234", "-0", "+1", "1e0", "0x1", "NaN", "Infinity", " 0.5"),
  fc.double().map(String),
  fc.string({ maxLength: 6 }).filter((s) => !/[,;"]/.test(s)),
);
const param = fc.oneof(
  fc.tuple(token, token).map(([k, v]) => `${k}=${v}`),
  fc.tuple(token, fc.string({ maxLength: 10 })).map(([k, v]) =>
    `${k}="${v.replace(/["\\]/g, (c) => `\\${c}`)}"`
  ),
);

function check(h: string): void {
  const items = withinSync(FAST_MS, "parseAccept", () => parseAccept(h));
  for (const [i, it] of items.entries()) {
    const slash = it.mediaType.indexOf("/");
    assert.ok(slash > 0, it.mediaType);
    assert.ok(
      TOKEN.test(it.mediaType.slice(0, slash)) && TOKEN.test(it.mediaType.slice(slash + 1)),
    );
    assert.ok(it.q > 0 && it.q <= 1 && Math.round(it.q * 1000) === it.q * 1000, String(it.q));
    if (i > 0) assert.ok(items[i - 1].q >= it.q, "ordered by q");
  }
  // what goes upstream reads back as the same list, and is never larger than what came in
  const out = forwardAccept(h);
  if (items.length === 0) {
    assert.equal(out, DEFAULT_MANIFEST_ACCEPT.join(", "));
  } else {
    assert.deepEqual(parseAccept(out), items, `${JSON.stringify(h)} → ${JSON.stringify(out)}`);
    assert.ok(out.length <= h.length + items.length, "forwarded no larger than received");
  }
}

Deno.test("fuzz accept: items of any q order stably by q; bad q drops the item", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          range: mediaRange,
          before: fc.array(param, { maxLength: 2 }),
          q: fc.option(fc.tuple(fc.constantFrom("q", "Q", " q "), qValue), { nil: null }),
          after: fc.array(param.filter((p) => !/^q\s*=/i.test(p)), { maxLength: 2 }),
        }),
        { maxLength: 8 },
      ),
      (items) => {
        const parts = items.map((it) =>
          [
            it.range,
            ...it.before.filter((p) => !/^q\s*=/i.test(p)),
            ...(it.q ? [`${it.q[0]}=${it.q[1]}`] : []),
            ...it.after,
          ].join(";")
        );
        const h = parts.join(", ");
        const qOf = (it: (typeof items)[number]) =>
          it.q === null ? 1 : QVALUE.test(it.q[1].trim()) ? Number(it.q[1].trim()) : 0;
        const kept = items.map((it, i) => ({ i, q: qOf(it) })).filter((x) => x.q > 0);
        // the reference order: stable sort by q, descending
        const want = [...kept].sort((a, b) => b.q - a.q || a.i - b.i);
        const got = parseAccept(h);
        assert.deepEqual(
          got.map((g) => [g.mediaType, g.q]),
          want.map((w) => [items[w.i].range.toLowerCase(), w.q]),
          h,
        );
        check(h);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz accept: any header parses without throwing and forwards as it read", () => {
  const sample =
    'application/vnd.oci.image.index.v1+json;q=0.9, application/vnd.docker.distribution.manifest.v2+json; profile="a,b";q=0.5, */*;q=0.1';
  const piece = fc.constantFrom("a/b", ";", ",", '"', "\\", "q=", "0.5", " ", "=", "/", "x");
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ maxLength: 200 }),
        fc.string({ unit: "binary", maxLength: 200 }),
        mutatedText(sample, 10),
        fc.array(piece, { maxLength: 100 }).map((p) => p.join("")),
      ),
      check,
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz accept: regressions", () => {
  // an item left inside an open quote moved ahead of one with a lower q and, forwarded,
  // swallowed it: upstream read one item where the client sent two
  check('c/d;q=0.5, a/b;p="x');
  assert.deepEqual(parseAccept('c/d;q=0.5, a/b;p="x').map((i) => i.mediaType), ["c/d"]);
  check('a/b;q=0.1, c/d;p="\\", e/f;p="\\\\');
});

Deno.test("fuzz accept: a megabyte header of any shape parses in linear time", async () => {
  const shapes: [string, (n: number) => string][] = [
    ["items", (n) => "a/b;q=0.5, ".repeat(n / 11)],
    ['"', (n) => '"'.repeat(n)],
    ["quoted ,", (n) => 'a/b;p="' + ",".repeat(n) + '"'],
    [";", (n) => "a/b" + ";".repeat(n)],
    ["\\", (n) => 'a/b;p="' + "\\".repeat(n)],
    ["spaces", (n) => "a/b" + " ".repeat(n) + ";q=1"],
    ["q ties", (n) => "a/b;q=0.5,c/d;q=0.7,".repeat(n / 20)],
  ];
  for (const [what, make] of shapes) await assertLinear(`Accept ${what}`, make, forwardAccept);
});
