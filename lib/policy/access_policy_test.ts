import assert from "node:assert/strict";
import { AccessPolicy, PolicyCompileError } from "./access_policy.ts";

const req = (action: string, extra: Record<string, string> = {}) => ({
  action,
  method: "GET",
  ...extra,
});

Deno.test("deny default: a true rule grants, errors and non-bools grant nothing", () => {
  const p = AccessPolicy.compile({
    default: "deny",
    rules: [
      'identity.username == "alice"', // errors for anonymous: must not grant
      'request.action == "healthz"',
      '"not a bool"',
    ],
  }, "global.access_policy");
  assert.equal(p.allows(req("get-blob"), { username: "alice" }), true);
  assert.equal(p.allows(req("get-blob"), { username: "bob" }), false);
  assert.equal(p.allows(req("get-blob"), {}), false);
  assert.equal(p.allows(req("healthz"), {}), true);
});

Deno.test("allow default: a true rule refuses, and an erroring rule refuses too (fail closed)", () => {
  const p = AccessPolicy.compile({
    default: "allow",
    rules: ['request.action == "delete-manifest" && identity.username != "admin"'],
  }, "global.access_policy");
  assert.equal(p.allows(req("get-manifest"), {}), true);
  assert.equal(p.allows(req("delete-manifest"), { username: "admin" }), true);
  assert.equal(p.allows(req("delete-manifest"), { username: "eve" }), false);
  assert.equal(p.allows(req("delete-manifest"), {}), false, "absent username errors → refused");
});

Deno.test("has() sees absent fields, claims and certificates are maps", () => {
  const p = AccessPolicy.compile({
    default: "deny",
    rules: [
      'has(identity.claims) && "ops" in identity.claims.groups',
      'has(identity.certificate) && "Acme" in identity.certificate.organizations',
      'has(request.namespace) && request.namespace.startsWith("public/")',
    ],
  }, "p");
  assert.equal(p.allows(req("get-blob"), { claims: { groups: ["ops"] } }), true);
  assert.equal(
    p.allows(req("get-blob"), {
      certificate: { common_name: "c", organizations: ["Acme"], organizational_units: [] },
    }),
    true,
  );
  assert.equal(p.allows(req("get-blob", { namespace: "public/x" }), {}), true);
  assert.equal(p.allows(req("get-blob", { namespace: "private/x" }), {}), false);
  assert.equal(p.allows(req("get-api-version"), {}), false);
});

Deno.test("a syntax error names the policy and the rule", () => {
  assert.throws(
    () =>
      AccessPolicy.compile(
        { default: "deny", rules: ["true", "1 +"] },
        'repository."a".access_policy',
      ),
    (e) =>
      e instanceof PolicyCompileError &&
      /repository\."a"\.access_policy\.rules\[1\] \(1 \+\)/.test(e.message),
  );
});

Deno.test("PolicySet: global and the namespace's repository policy must both allow", async () => {
  const { PolicySet } = await import("./policy_set.ts");
  const { buildConfig } = await import("../config/mod.ts");
  const cfg = buildConfig({
    global: {
      access_policy: {
        default: "deny",
        rules: ["has(identity.username)", 'request.action == "healthz"'],
      },
    },
    repository: {
      "team": { access_policy: { default: "deny", rules: ['identity.username == "alice"'] } },
    },
  }, []);
  const set = new PolicySet(cfg);
  const r = (action: string, namespace?: string) => ({
    action,
    method: "GET",
    ...(namespace ? { namespace } : {}),
  });
  assert.equal(set.allows(r("healthz"), {}), true);
  assert.equal(
    set.allows(r("get-blob", "other/x"), { username: "bob" }),
    true,
    "implicit repository: global only",
  );
  assert.equal(
    set.allows(r("get-blob", "team/x"), { username: "bob" }),
    false,
    "repository policy refuses",
  );
  assert.equal(set.allows(r("get-blob", "team/x"), { username: "alice" }), true);
  assert.equal(set.allows(r("get-blob", "team"), {}), false, "global refuses anonymous");
  // request.repository is derived, so rules may use it
  const set2 = new PolicySet(buildConfig({
    global: {
      access_policy: {
        default: "deny",
        rules: ['has(request.repository) && request.repository == "team"'],
      },
    },
    repository: { "team": {} },
  }, []));
  assert.equal(set2.allows(r("get-blob", "team/deep/name"), {}), true);
  assert.equal(set2.allows(r("get-blob", "teams/x"), {}), false);
});
