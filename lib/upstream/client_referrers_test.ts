import assert from "node:assert/strict";
import { FakeRegistry, sha256Of } from "../../tests/helpers/fake_registry.ts";
import { imageManifest, OCI_CONFIG, OCI_EMPTY, unique } from "../../tests/helpers/oci_content.ts";
import { startUpstream } from "../../tests/helpers/upstream_client.ts";
import { UpstreamError } from "./errors.ts";

const SBOM = "application/vnd.example.sbom+json";
const SIG = "application/vnd.example.signature";

function subject(reg: FakeRegistry, name: string): string {
  const cfg = unique("cfg");
  return reg.addManifest(
    name,
    imageManifest({ mediaType: OCI_CONFIG, digest: sha256Of(cfg), size: cfg.length }, []),
  );
}

/** A referrer of `subjectDigest` with `artifactType`; returns its digest. */
function refer(reg: FakeRegistry, name: string, subjectDigest: string, artifactType: string) {
  const body = imageManifest(
    { mediaType: OCI_EMPTY, digest: sha256Of(new TextEncoder().encode("{}")), size: 2 },
    [],
    {
      artifactType,
      subject: {
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        digest: subjectDigest,
        size: 1,
      },
      annotations: { "org.example.nonce": crypto.randomUUID() },
    },
  );
  return reg.addManifest(name, body);
}

Deno.test("getReferrers: the upstream's descriptors, artifactType passed through", async () => {
  await using t = await startUpstream();
  const s = subject(t.reg, "x");
  const sbom = refer(t.reg, "x", s, SBOM);
  const sig = refer(t.reg, "x", s, SIG);
  refer(t.reg, "x", subject(t.reg, "x"), SBOM); // another subject's

  const all = await t.client.getReferrers("x", s);
  assert.deepEqual(all.map((d) => d.digest).sort(), [sbom, sig].sort());
  const one = all.find((d) => d.digest === sbom)!;
  assert.equal(one.artifactType, SBOM);
  assert.equal(one.mediaType, "application/vnd.oci.image.manifest.v1+json");
  assert.ok(one.annotations?.["org.example.nonce"]);

  assert.deepEqual((await t.client.getReferrers("x", s, SBOM)).map((d) => d.digest), [sbom]);
  const [, filtered] = t.reg.seen("GET", "/referrers/");
  assert.equal(filtered.query.get("artifactType"), SBOM);
  assert.equal(filtered.accept, "application/vnd.oci.image.index.v1+json");
});

Deno.test("getReferrers: filtered here when the upstream ignores artifactType", async () => {
  await using t = await startUpstream({ referrersFilter: false });
  const s = subject(t.reg, "x");
  const sbom = refer(t.reg, "x", s, SBOM);
  refer(t.reg, "x", s, SIG);
  assert.deepEqual((await t.client.getReferrers("x", s, SBOM)).map((d) => d.digest), [sbom]);
  assert.deepEqual(await t.client.getReferrers("x", s, "application/vnd.none"), []);
});

Deno.test("getReferrers: every page followed through Link", async () => {
  await using t = await startUpstream({ referrersPageSize: 2 });
  const s = subject(t.reg, "x");
  const want = [1, 2, 3, 4, 5].map(() => refer(t.reg, "x", s, SBOM));
  const got = await t.client.getReferrers("x", s, SBOM);
  assert.deepEqual(got.map((d) => d.digest).sort(), want.sort());
  assert.equal(t.reg.count("GET", "/referrers/"), 3);
  assert.ok(t.reg.seen("GET", "/referrers/").every((r) => r.query.get("artifactType") === SBOM));
});

Deno.test("getReferrers: no referrers API (404) is an empty list", async () => {
  await using t = await startUpstream({ referrersApi: false });
  const s = subject(t.reg, "x");
  refer(t.reg, "x", s, SBOM);
  assert.deepEqual(await t.client.getReferrers("x", s), []);
});

Deno.test("getReferrers: a body that is not an image index is invalid", async () => {
  await using t = await startUpstream();
  const s = subject(t.reg, "x");
  const bodies: [string, RegExp][] = [
    ["<html>nope</html>", /answer is not JSON/],
    ['{"schemaVersion":2}', /answer is not an image index/],
    [
      '{"mediaType":"application/vnd.oci.image.manifest.v1+json","manifests":[]}',
      /not an image index/,
    ],
    ['[{"manifests":[]}]', /not an image index/],
    [
      '{"manifests":[{"mediaType":"a/b","digest":"sha256:x","size":1}]}',
      /manifests\[0\]: invalid digest/,
    ],
    [
      '{"manifests":[{"mediaType":"a/b","digest":"' + s + '","size":-1}]}',
      /manifests\[0\]: invalid size/,
    ],
  ];
  for (const [body, msg] of bodies) {
    t.reg.fault({ path: "/referrers/", times: 1 }, { replaceBody: body });
    await assert.rejects(t.client.getReferrers("x", s), (e: unknown) => {
      assert.ok(e instanceof UpstreamError, String(e));
      assert.equal(e.kind, "invalid");
      assert.match(e.message, msg);
      return true;
    }, body);
  }
  t.reg.fault({ path: "/referrers/", times: 1 }, { status: 500 });
  await assert.rejects(t.client.getReferrers("x", s), /500/);
});

Deno.test("getReferrers: a next page on another origin is refused", async () => {
  await using t = await startUpstream();
  const s = subject(t.reg, "x");
  t.reg.fault({ path: "/referrers/", times: 1 }, {
    status: 200,
    headers: { link: `<${t.reg.urlFor(t.reg.otherHost)}/v2/x/referrers/${s}?last=1>; rel="next"` },
    body: '{"schemaVersion":2,"manifests":[]}',
  });
  await assert.rejects(t.client.getReferrers("x", s), /next page on another origin/);
});
