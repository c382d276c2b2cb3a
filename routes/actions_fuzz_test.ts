// Property fuzzing of request routing (routes/actions.ts): the method and path of any request map
// to the action authorization decides, and the name in it agrees with the OCI name grammar. A name
// may hold route words (`blobs`, `manifests`, `tags`, `uploads`, a component ending in `_svc`)
// and still route right; anything the grammar refuses is NAME_INVALID, never another name.
import assert from "node:assert/strict";
import { type Action, comparedRefs, parseAction, pushTags } from "./actions.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import { MAX_TAGS_PER_PUSH } from "../lib/registry/mod.ts";
import {
  assertLinear,
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  withinSync,
} from "../tests/helpers/fuzz.ts";

/** The OCI distribution spec's repository name, written out independently of lib/oci. */
const SPEC_NAME = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/;
const specName = (s: string) => s.length <= 255 && SPEC_NAME.test(s);

const D = `sha256:${"0123456789abcdef".repeat(4)}`;
const U = "0b0d8b4e-3f3c-4bfa-9d6f-8c9a8a3e2f10";

const ROUTE_WORDS = [
  "blobs",
  "manifests",
  "tags",
  "list",
  "uploads",
  "referrers",
  "v2",
  "svc",
  "x_svc",
  "my__svc",
  "layers",
  "entries",
  "diff",
  "revisions",
  "pulls",
  "vulnerabilities",
  "signatures",
  "catalog",
];
const component = fc.oneof(
  fc.constantFrom(...ROUTE_WORDS),
  fc.stringMatching(/^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/),
);
const validName = fc.array(component, { minLength: 1, maxLength: 6 }).map((p) => p.join("/"))
  .filter((n) => n.length <= 255);
const tag = fc.oneof(
  fc.constantFrom("latest", "list", "blobs", "uploads", "_svc", "manifests", "v1.0", "__"),
  fc.stringMatching(/^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,40}$/),
);

/** Every route that names a repository: method, path of (name, tag) and the action expected. */
const TEMPLATES: [string, (n: string, t: string) => string, (t: string) => Partial<Action>][] = [
  ["GET", (n) => `/v2/${n}/tags/list`, () => ({ name: "list-tags" })],
  ["HEAD", (n) => `/v2/${n}/tags/list`, () => ({ name: "list-tags" })],
  [
    "GET",
    (n, t) => `/v2/${n}/manifests/${t}`,
    (t) => ({ name: "get-manifest", reference: t, tag: t }),
  ],
  [
    "PUT",
    (n) => `/v2/${n}/manifests/${D}`,
    () => ({ name: "put-manifest", reference: D, digest: D }),
  ],
  [
    "DELETE",
    (n) => `/v2/${n}/manifests/${D.replace(":", "%3A")}`,
    () => ({ name: "delete-manifest", reference: D, digest: D }),
  ],
  ["HEAD", (n) => `/v2/${n}/blobs/${D}`, () => ({ name: "get-blob", digest: D })],
  ["DELETE", (n) => `/v2/${n}/blobs/${D}`, () => ({ name: "delete-blob", digest: D })],
  ["POST", (n) => `/v2/${n}/blobs/uploads/`, () => ({ name: "start-upload" })],
  ["POST", (n) => `/v2/${n}/blobs/uploads`, () => ({ name: "start-upload" })],
  ["PATCH", (n) => `/v2/${n}/blobs/uploads/${U}`, () => ({ name: "update-upload", uuid: U })],
  ["PUT", (n) => `/v2/${n}/blobs/uploads/${U}`, () => ({ name: "complete-upload", uuid: U })],
  ["GET", (n) => `/v2/${n}/referrers/${D}`, () => ({ name: "get-referrers", digest: D })],
  ["GET", (n) => `/v2/${n}/_svc/revisions/list`, () => ({ name: "list-revisions" })],
  [
    "GET",
    (n) => `/v2/${n}/_svc/pulls/list`,
    () => ({ name: "list-revisions", resource: "pulls" }),
  ],
  ["GET", (n) => `/v2/${n}/_svc/uploads/list`, () => ({ name: "list-uploads" })],
  [
    "GET",
    (n) => `/v2/${n}/_svc/layers/${D}/entries`,
    () => ({ name: "get-blob", digest: D, resource: "layer-entries" }),
  ],
  [
    "GET",
    (n) => `/v2/${n}/_svc/layers/${D}/file`,
    () => ({ name: "get-blob", digest: D, resource: "layer-file" }),
  ],
  ["GET", (n) => `/v2/${n}/_svc/diff`, () => ({ name: "diff-images", resource: "diff" })],
  [
    "GET",
    (n, t) => `/v2/${n}/_svc/vulnerabilities/${t}`,
    (t) => ({ name: "get-report", resource: "vulnerabilities", reference: t, tag: t }),
  ],
];
const template = fc.constantFrom(...TEMPLATES);

/** parseAction, held to its contract: an Action, null, or a RegistryError; fast; short detail. */
function route(method: string, path: string): Action | null | RegistryError {
  try {
    return withinSync(FAST_MS, "parseAction", () => parseAction(method, path));
  } catch (e) {
    expectOnly(e, RegistryError);
    assert.ok((e as RegistryError).detail.length < 300, "a bounded detail");
    return e as RegistryError;
  }
}

Deno.test("fuzz routing: a valid name with route words routes to its action and keeps its name", () => {
  fc.assert(
    fc.property(validName, tag, template, (name, t, [method, path, want]) => {
      assert.ok(specName(name));
      assert.deepEqual(parseAction(method, path(name, t)), {
        ...want(t),
        namespace: name,
      }, `${method} ${path(name, t)}`);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz routing: the name agrees with the SPEC grammar; anything else is NAME_INVALID", () => {
  const nameChar = fc.constantFrom(
    ..."abz09._-/_/A%:@ \t\n\u2028é\u0000",
  );
  const near = fc.oneof(
    fc.array(nameChar, { maxLength: 30 }).map((cs) => cs.join("")),
    fc.string({ maxLength: 40 }),
    validName.map((n) => n + "/"),
    validName.map((n) => "/" + n),
    validName.map((n) => n.replace("/", "//")),
    validName.map((n) => n.toUpperCase()),
    validName.map((n) => n.replace("/", "%2F")),
    validName.map((n) => `${n}/_svc`),
    validName.map((n) => `_svc/${n}`),
    validName.map((n) => `${n}/..`),
    fc.tuple(validName, fc.constantFrom(".", "_", "__", "-", "---", "___", "._")).map((
      [n, sep],
    ) => `${n}${sep}a`),
    fc.nat(300).map((k) => "a".repeat(k)),
  );
  fc.assert(
    fc.property(near, tag, template, (s, t, [method, path, want]) => {
      const got = route(method, path(s, t));
      if (specName(s)) {
        assert.deepEqual(got, { ...want(t), namespace: s });
      } else if (s === "" || /[\n\r\u2028\u2029]/.test(s)) {
        // no request line carries these raw; the pattern's `.` stops at them
        assert.ok(got === null || (got instanceof RegistryError && got.code === "NAME_INVALID"));
      } else {
        assert.ok(got instanceof RegistryError, `${JSON.stringify(s)} → ${JSON.stringify(got)}`);
        assert.equal(got.code, "NAME_INVALID", JSON.stringify(s));
        assert.equal(got.status, 400);
      }
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz routing: any request line routes or is refused, and a name is always valid", () => {
  const method = fc.oneof(
    fc.constantFrom("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "get", ""),
    fc.string({ maxLength: 10 }),
  );
  const segment = fc.oneof(
    fc.constantFrom(
      "v2",
      "_svc",
      "blobs",
      "uploads",
      "manifests",
      "tags",
      "list",
      "referrers",
      "layers",
      "entries",
      "_catalog",
      "jobs",
      "failed",
      D,
      D.replace(":", "%3A"),
      U,
      "sha256%3",
      "%zz",
      "%",
      "..",
      ".",
      "",
    ),
    component,
    fc.string({ maxLength: 8 }),
  );
  const path = fc.oneof(
    fc.array(segment, { maxLength: 10 }).map((s) => "/" + s.join("/")),
    fc.array(segment, { maxLength: 10 }).map((s) => "/v2/" + s.join("/")),
    fc.string({ maxLength: 80 }),
  );
  fc.assert(
    fc.property(method, path, fc.boolean(), (m, p, viaUrl) => {
      // as the app reads it (the URL parser's path), or raw
      const url = () => new URL(`http://registry.example${p.startsWith("/") ? "" : "/"}${p}`);
      const got = route(m, viaUrl ? url().pathname : p);
      if (got === null || got instanceof RegistryError) return;
      if (got.namespace !== undefined) assert.ok(specName(got.namespace), got.namespace);
      if (got.digest !== undefined) {
        assert.match(got.digest, /^sha(256:[0-9a-f]{64}|512:[0-9a-f]{128})$/);
      }
      if (got.uuid !== undefined) assert.equal(got.uuid, U);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz routing: ?tag= of a push by digest and ?from=&to= of a diff never throw otherwise", () => {
  const put = parseAction("PUT", `/v2/a/manifests/${D}`)!;
  const putTag = parseAction("PUT", "/v2/a/manifests/v1")!;
  const diff = parseAction("GET", "/v2/a/_svc/diff")!;
  const values = fc.array(fc.oneof(tag, fc.string({ maxLength: 20 })), { maxLength: 12 });
  fc.assert(
    fc.property(values, values, (vs, ws) => {
      let tags: string[] | undefined | RegistryError;
      try {
        tags = pushTags(put, vs);
      } catch (e) {
        expectOnly(e, RegistryError);
        tags = e as RegistryError;
      }
      const valid = (t: string) => /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/.test(t);
      if (vs.length === 0) assert.equal(tags, undefined);
      else if (vs.every(valid)) assert.deepEqual(tags, [...new Set(vs)]);
      else {
        assert.ok(tags instanceof RegistryError);
        assert.equal(tags.code, "UNSUPPORTED");
      }
      // a push by tag ignores them; a diff reads from and to
      assert.equal(pushTags(putTag, vs), undefined);
      const refs = comparedRefs(diff, vs, ws);
      if (refs !== undefined) {
        assert.ok(vs.length === 1 && ws.length === 1);
        assert.deepEqual(refs, [...new Set([vs[0], ws[0]])]);
      }
    }),
    fuzzParams(),
  );
  const many = Array.from({ length: MAX_TAGS_PER_PUSH + 1 }, (_, i) => `t${i}`);
  assert.throws(() => pushTags(put, many), RegistryError);
  assert.equal(
    pushTags(put, [...many.slice(0, MAX_TAGS_PER_PUSH), "t0"])?.length,
    MAX_TAGS_PER_PUSH,
  );
});

Deno.test("fuzz routing: a megabyte path routes in linear time", async () => {
  const shapes: [string, (n: number) => string][] = [
    ["a/", (n) => "/v2/" + "a/".repeat(n / 2) + "x"],
    ["blobs", (n) => "/v2/" + "a/blobs/".repeat(n / 8) + "x"],
    ["uploads", (n) => "/v2/" + "a/blobs/uploads/".repeat(n / 16) + "tags"],
    ["_svc layers", (n) => "/v2/" + "_svc/layers/a/".repeat(n / 14) + "entries/x"],
    ["long name", (n) => "/v2/" + "a".repeat(n) + "/manifests/x"],
    ["slashes", (n) => "/v2/" + "/".repeat(n)],
    ["digest", (n) => "/v2/a/blobs/" + "%3A".repeat(n / 3)],
    ["manifests", (n) => "/v2/" + "manifests/".repeat(n / 10) + "tags/list"],
  ];
  for (const [what, make] of shapes) {
    await assertLinear(`path ${what}`, make, (p) => route("GET", p));
  }
});
