import assert from "node:assert/strict";
import { DEFAULT_MANIFEST_ACCEPT, formatAcceptItem, forwardAccept, parseAccept } from "./accept.ts";

const OCI_M = "application/vnd.oci.image.manifest.v1+json";
const OCI_I = "application/vnd.oci.image.index.v1+json";
const DOCKER_M = "application/vnd.docker.distribution.manifest.v2+json";

Deno.test("parseAccept: values ordered by q, ties in the client's order, q=0 dropped", () => {
  const cases: [string | null, string[]][] = [
    [null, []],
    ["", []],
    [OCI_M, [OCI_M]],
    [`${OCI_M}, ${OCI_I}`, [OCI_M, OCI_I]],
    [`${OCI_M};q=0.5, ${OCI_I}`, [OCI_I, `${OCI_M};q=0.5`]],
    [`${DOCKER_M};q=0.9,${OCI_M};q=0.9,${OCI_I}`, [OCI_I, `${DOCKER_M};q=0.9`, `${OCI_M};q=0.9`]],
    [`${OCI_M};q=0, ${OCI_I}`, [OCI_I]],
    [`${OCI_M};q=0.000`, []],
    // parameters other than q stay with their type; Q is q
    [`${OCI_M}; profile="a,b"; Q=0.2, ${OCI_I}`, [OCI_I, `${OCI_M};profile="a,b";q=0.2`]],
    // case-insensitive type, whitespace and empty list elements
    ["  Application/JSON ;q=1 ,, text/plain ", ["application/json", "text/plain"]],
    ["*/*", ["*/*"]],
    [`${OCI_M};q=1.000`, [OCI_M]],
    // malformed items are dropped, the rest kept
    [`${OCI_M};q=2, ${OCI_I}`, [OCI_I]],
    [`${OCI_M};q=abc, ${OCI_I}`, [OCI_I]],
    [`${OCI_M};q=0.1234, ${OCI_I}`, [OCI_I]],
    [`${OCI_M};q=, ${OCI_I}`, [OCI_I]],
    ["manifest, /json, a/, a b/c", []],
    [`"${OCI_M}"`, []],
  ];
  for (const [header, want] of cases) {
    assert.deepEqual(parseAccept(header).map(formatAcceptItem), want, String(header));
  }
});

Deno.test("parseAccept returns the weights", () => {
  assert.deepEqual(parseAccept(`a/b;q=0.3, c/d;v=1`), [
    { mediaType: "c/d", params: ["v=1"], q: 1 },
    { mediaType: "a/b", params: [], q: 0.3 },
  ]);
});

Deno.test("forwardAccept: the client's order, or every manifest type when it sent none", () => {
  const all = DEFAULT_MANIFEST_ACCEPT.join(", ");
  assert.equal(forwardAccept(null), all);
  assert.equal(forwardAccept(""), all);
  assert.equal(forwardAccept(`${OCI_M};q=0`), all, "nothing acceptable left");
  assert.equal(forwardAccept(`${OCI_M};q=0.5, ${OCI_I}`), `${OCI_I}, ${OCI_M};q=0.5`);
  assert.deepEqual(
    [...DEFAULT_MANIFEST_ACCEPT].sort(),
    [
      "application/vnd.docker.distribution.manifest.list.v2+json",
      DOCKER_M,
      OCI_I,
      OCI_M,
    ],
  );
});
