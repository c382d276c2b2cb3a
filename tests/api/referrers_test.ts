// SPEC §Referrers: the listing of a subject's referrers as an image index, the artifactType filter,
// pages of 100 with a Link repeating the encoded filter, the fallback tag folded in, bad input
// (DIGEST_INVALID, never 404), unknown subjects, and deleted referrers leaving the listing.
import assert from "node:assert/strict";
import { assertError, nextLink, req, serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import {
  descOf,
  type Descriptor,
  imageIndex,
  imageManifest,
  OCI_CONFIG,
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  putManifestOk,
} from "../helpers/oci_content.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";

// `+` and `/` both need percent-encoding in a query, which is what the Link rule is about.
const TYPE_A = "application/vnd.example.sbom.v1+json";
const TYPE_B = "application/vnd.example.signature.v1+json";
const enc = new TextEncoder();
const EMPTY_BYTES = enc.encode("{}");

/** Pushes a plain image to be used as a subject; returns its descriptor. */
async function pushSubject(s: TestServer, ns: string, tag: string): Promise<Descriptor> {
  const cfg = enc.encode(JSON.stringify({ os: "linux", tag, nonce: crypto.randomUUID() }));
  const config = await pushBlob(s.url, ns, cfg);
  const body = imageManifest({ mediaType: OCI_CONFIG, digest: config, size: cfg.length }, []);
  await putManifestOk(s, ns, tag, body);
  return await descOf(OCI_MANIFEST, body);
}

interface Artifact {
  body: Uint8Array;
  /** the descriptor the listing must show for it */
  desc: Descriptor;
}

/**
 * Builds an artifact manifest. `artifactType: null` leaves the field out so that the config's
 * media type stands in for it, as OCI image-spec prescribes.
 */
async function artifact(
  subject: Descriptor | null,
  type: string,
  annotations: Record<string, string> | null,
  opts: { artifactType?: null } = {},
): Promise<Artifact> {
  const m: Record<string, unknown> = { schemaVersion: 2, mediaType: OCI_MANIFEST };
  const emptyDesc = { mediaType: OCI_EMPTY, digest: await sha256(EMPTY_BYTES), size: 2 };
  if (opts.artifactType === null) {
    m.config = { mediaType: type, digest: emptyDesc.digest, size: 2 };
  } else {
    m.artifactType = type;
    m.config = emptyDesc;
  }
  m.layers = [emptyDesc];
  if (subject) m.subject = subject;
  if (annotations) m.annotations = annotations;
  const body = enc.encode(JSON.stringify(m));
  const desc: Descriptor = {
    mediaType: OCI_MANIFEST,
    digest: await sha256(body),
    size: body.length,
    artifactType: type,
  };
  if (annotations) desc.annotations = annotations;
  return { body, desc };
}

async function pushArtifact(s: TestServer, ns: string, a: Artifact): Promise<Response> {
  return await putManifestOk(s, ns, a.desc.digest, a.body);
}

interface Listing {
  status: number;
  headers: Headers;
  manifests: Descriptor[];
  link: string | null;
}

/** One referrers page, with the index envelope checked. */
async function page(s: TestServer, path: string): Promise<Listing> {
  const r = await req(s, path);
  const text = await r.text();
  assert.equal(r.status, 200, `GET ${path}: ${r.status} ${text}`);
  assert.equal(r.headers.get("content-type")?.split(";")[0].trim(), OCI_INDEX);
  const body = JSON.parse(text);
  assert.equal(body.schemaVersion, 2);
  assert.equal(body.mediaType, OCI_INDEX);
  assert.ok(Array.isArray(body.manifests), text);
  return { status: r.status, headers: r.headers, manifests: body.manifests, link: nextLink(r) };
}

/** Every page from `first`, following Link until absent (bounded against loops). */
async function allPages(s: TestServer, first: string): Promise<Listing[]> {
  const pages: Listing[] = [];
  let path: string | null = first;
  while (path !== null) {
    assert.ok(pages.length < 20, "Link chain does not end");
    const p = await page(s, path);
    pages.push(p);
    path = p.link;
  }
  return pages;
}

function byDigest(ds: Descriptor[]): Descriptor[] {
  return [...ds].sort((a, b) => a.digest < b.digest ? -1 : a.digest > b.digest ? 1 : 0);
}

/** Compares a listing with the expected descriptors, ignoring order and empty annotations. */
function assertDescriptors(actual: Descriptor[], expected: Descriptor[]): void {
  const norm = (d: Descriptor) => {
    const out: Descriptor = {
      mediaType: d.mediaType,
      digest: d.digest,
      size: d.size,
      artifactType: d.artifactType,
    };
    if (d.annotations && Object.keys(d.annotations).length > 0) out.annotations = d.annotations;
    return out;
  };
  assert.deepEqual(byDigest(actual).map(norm), byDigest(expected).map(norm));
}

function rawQueryParam(link: string, name: string): string | null {
  const q = link.split("?")[1] ?? "";
  for (const part of q.split("&")) {
    const i = part.indexOf("=");
    if (i >= 0 && part.slice(0, i) === name) return part.slice(i + 1);
  }
  return null;
}

Deno.test({
  name: "referrers listing and artifactType filter",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "ref/basic";
      await pushBlob(s.url, ns, EMPTY_BYTES);
      const subject = await pushSubject(s, ns, "app");
      const a1 = await artifact(subject, TYPE_A, { "org.example.n": "a1" });
      const a2 = await artifact(subject, TYPE_A, null);
      const b1 = await artifact(subject, TYPE_B, { "org.example.n": "b1", "org.example.k": "v" });
      const b2 = await artifact(subject, TYPE_B, { "org.example.n": "b2" }, { artifactType: null });
      const unrelated = await artifact(null, TYPE_A, { "org.example.n": "no subject" });
      const path = `/v2/${ns}/referrers/${subject.digest}`;

      await t.step("pushing a referrer answers 201 with OCI-Subject", async () => {
        for (const a of [a1, a2, b1, b2]) {
          const r = await pushArtifact(s, ns, a);
          assert.equal(r.headers.get("oci-subject"), subject.digest);
        }
        const r = await pushArtifact(s, ns, unrelated);
        assert.equal(r.headers.get("oci-subject"), null);
      });

      await t.step("the listing holds every referrer as a descriptor", async () => {
        const p = await page(s, path);
        assert.equal(p.link, null);
        assert.equal(p.headers.get("oci-filters-applied"), null);
        assertDescriptors(p.manifests, [a1.desc, a2.desc, b1.desc, b2.desc]);
      });

      await t.step("without artifactType the config media type stands in", async () => {
        const p = await page(s, path);
        const d = p.manifests.find((m) => m.digest === b2.desc.digest);
        assert.equal(d?.artifactType, TYPE_B);
      });

      await t.step("artifactType filters and says so in OCI-Filters-Applied", async () => {
        const pa = await page(s, `${path}?artifactType=${encodeURIComponent(TYPE_A)}`);
        assert.equal(pa.headers.get("oci-filters-applied"), "artifactType");
        assertDescriptors(pa.manifests, [a1.desc, a2.desc]);
        const pb = await page(s, `${path}?artifactType=${encodeURIComponent(TYPE_B)}`);
        assert.equal(pb.headers.get("oci-filters-applied"), "artifactType");
        assertDescriptors(pb.manifests, [b1.desc, b2.desc]);
      });

      await t.step("a filter matching nothing gives an empty index", async () => {
        const p = await page(s, `${path}?artifactType=application%2Fvnd.example.none`);
        assert.equal(p.headers.get("oci-filters-applied"), "artifactType");
        assert.deepEqual(p.manifests, []);
      });

      await t.step("referrers in another namespace are not listed", async () => {
        await pushBlob(s.url, "ref/other", EMPTY_BYTES);
        const foreign = await artifact(subject, TYPE_A, { "org.example.n": "foreign" });
        await pushArtifact(s, "ref/other", foreign);
        assertDescriptors((await page(s, path)).manifests, [a1.desc, a2.desc, b1.desc, b2.desc]);
        const other = await page(s, `/v2/ref/other/referrers/${subject.digest}`);
        assertDescriptors(other.manifests, [foreign.desc]);
      });

      await t.step("a tagged referrer is listed once", async () => {
        await putManifestOk(s, ns, "sig", a1.body);
        assertDescriptors((await page(s, path)).manifests, [a1.desc, a2.desc, b1.desc, b2.desc]);
      });

      await t.step("deleting only the referrer's tag keeps it listed", async () => {
        const r = await req(s, `/v2/${ns}/manifests/sig`, { method: "DELETE" });
        assert.equal(r.status, 202);
        await r.body?.cancel();
        assertDescriptors((await page(s, path)).manifests, [a1.desc, a2.desc, b1.desc, b2.desc]);
      });

      await t.step("an image index can be a referrer", async () => {
        const subject2 = await pushSubject(s, ns, "app2");
        const body = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: OCI_INDEX,
          artifactType: TYPE_B,
          manifests: [],
          subject: subject2,
          annotations: { "org.example.n": "index" },
        }));
        const digest = await sha256(body);
        const r = await putManifestOk(s, ns, digest, body, OCI_INDEX);
        assert.equal(r.headers.get("oci-subject"), subject2.digest);
        const p = await page(s, `/v2/${ns}/referrers/${subject2.digest}`);
        assertDescriptors(p.manifests, [{
          mediaType: OCI_INDEX,
          digest,
          size: body.length,
          artifactType: TYPE_B,
          annotations: { "org.example.n": "index" },
        }]);
      });

      await t.step("deleting a referrer by digest removes it from the listing", async () => {
        const r = await req(s, `/v2/${ns}/manifests/${a1.desc.digest}`, { method: "DELETE" });
        assert.equal(r.status, 202);
        await r.body?.cancel();
        assertDescriptors((await page(s, path)).manifests, [a2.desc, b1.desc, b2.desc]);
        const pa = await page(s, `${path}?artifactType=${encodeURIComponent(TYPE_A)}`);
        assertDescriptors(pa.manifests, [a2.desc]);
      });
    }),
});

Deno.test({
  name: "referrers unknown subjects and invalid input",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "ref/input";
      const subject = await pushSubject(s, ns, "app");
      const unknown = await sha256(enc.encode(crypto.randomUUID()));

      await t.step("a subject with no referrers gives 200 and an empty index", async () => {
        const p = await page(s, `/v2/${ns}/referrers/${subject.digest}`);
        assert.deepEqual(p.manifests, []);
        assert.equal(p.link, null);
      });

      await t.step("an unknown subject gives 200 and an empty index", async () => {
        const p = await page(s, `/v2/${ns}/referrers/${unknown}`);
        assert.deepEqual(p.manifests, []);
      });

      await t.step("a namespace never written gives 200 and an empty index", async () => {
        const p = await page(s, `/v2/ref/never/referrers/${unknown}`);
        assert.deepEqual(p.manifests, []);
      });

      const badDigests = [
        "latest",
        "sha256:abc",
        `sha256:${"A".repeat(64)}`,
        `md5:${"a".repeat(32)}`,
        `sha512:${"a".repeat(64)}`,
        `sha256-${"a".repeat(64)}`,
      ];
      for (const bad of badDigests) {
        await t.step(`digest ${bad.slice(0, 20)} is 400 DIGEST_INVALID`, async () => {
          await assertError(await req(s, `/v2/${ns}/referrers/${bad}`), 400, "DIGEST_INVALID");
          await assertError(
            await req(s, `/v2/ref/never/referrers/${bad}`),
            400,
            "DIGEST_INVALID",
          );
        });
      }

      for (const bad of ["notamediatype", "application/", "/json", "a b/c"]) {
        await t.step(`artifactType ${JSON.stringify(bad)} is 400 DIGEST_INVALID`, async () => {
          const q = `?artifactType=${encodeURIComponent(bad)}`;
          const r = await req(s, `/v2/${ns}/referrers/${subject.digest}${q}`);
          await assertError(r, 400, "DIGEST_INVALID");
        });
      }
    }),
});

Deno.test({
  name: "referrers pages of 100 with Link, filtered pages filled",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "ref/paged";
      await pushBlob(s.url, ns, EMPTY_BYTES);
      const subject = await pushSubject(s, ns, "app");
      const typeA: Descriptor[] = [];
      const typeB: Descriptor[] = [];
      // Interleaved so that a filter applied after cutting a page of 100 would return short pages.
      for (let i = 0; i < 150; i++) {
        const a = await artifact(subject, TYPE_A, { "org.example.i": `a${i}` });
        const b = await artifact(subject, TYPE_B, { "org.example.i": `b${i}` });
        await pushArtifact(s, ns, a);
        await pushArtifact(s, ns, b);
        typeA.push(a.desc);
        typeB.push(b.desc);
      }
      const path = `/v2/${ns}/referrers/${subject.digest}`;

      await t.step("unfiltered: pages of 100, every referrer exactly once", async () => {
        const pages = await allPages(s, path);
        assert.ok(pages.length >= 3, `only ${pages.length} pages`);
        for (const p of pages.slice(0, 3)) assert.equal(p.manifests.length, 100);
        // A trailing empty page is tolerable: nothing in SPEC forbids advertising it.
        for (const p of pages.slice(3)) assert.equal(p.manifests.length, 0);
        for (const p of pages.slice(0, -1)) {
          assert.ok(p.link);
          const u = new URL(p.link, s.url);
          assert.equal(u.pathname, path);
          assert.equal(u.searchParams.get("artifactType"), null);
        }
        const all = pages.flatMap((p) => p.manifests);
        assert.equal(new Set(all.map((d) => d.digest)).size, 300, "duplicates across pages");
        assertDescriptors(all, [...typeA, ...typeB]);
      });

      await t.step("filtered: pages of 100 then 50, Link repeats the encoded filter", async () => {
        const q = `?artifactType=${encodeURIComponent(TYPE_A)}`;
        const first = await page(s, path + q);
        assert.equal(first.headers.get("oci-filters-applied"), "artifactType");
        assert.equal(first.manifests.length, 100);
        assert.ok(first.manifests.every((d) => d.artifactType === TYPE_A));
        assert.ok(first.link, "Link missing on a full filtered page");
        const u = new URL(first.link, s.url);
        assert.equal(u.pathname, path);
        assert.equal(u.searchParams.get("artifactType"), TYPE_A);
        const raw = rawQueryParam(first.link, "artifactType");
        assert.ok(raw !== null && !raw.includes("+"), `artifactType not percent-encoded: ${raw}`);
        assert.equal(decodeURIComponent(raw!), TYPE_A);

        const second = await page(s, first.link);
        assert.equal(second.headers.get("oci-filters-applied"), "artifactType");
        assert.equal(second.manifests.length, 50);
        assert.ok(second.manifests.every((d) => d.artifactType === TYPE_A));
        assert.equal(second.link, null);
        const all = [...first.manifests, ...second.manifests];
        assert.equal(new Set(all.map((d) => d.digest)).size, 150);
        assertDescriptors(all, typeA);
      });

      await t.step("the other filter pages the same way", async () => {
        const pages = await allPages(s, `${path}?artifactType=${encodeURIComponent(TYPE_B)}`);
        assert.deepEqual(pages.map((p) => p.manifests.length), [100, 50]);
        assertDescriptors(pages.flatMap((p) => p.manifests), typeB);
      });

      await t.step("deleting referrers shrinks the pages", async () => {
        for (const d of typeA.slice(0, 60)) {
          const r = await req(s, `/v2/${ns}/manifests/${d.digest}`, { method: "DELETE" });
          assert.equal(r.status, 202);
          await r.body?.cancel();
        }
        const pages = await allPages(s, `${path}?artifactType=${encodeURIComponent(TYPE_A)}`);
        assert.deepEqual(pages.map((p) => p.manifests.length), [90]);
        assertDescriptors(pages[0].manifests, typeA.slice(60));
      });
    }),
});

Deno.test({
  name: "referrers fallback tag is folded into the listing",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "ref/fallback";
      await pushBlob(s.url, ns, EMPTY_BYTES);
      const subject = await pushSubject(s, ns, "app");
      // Pushed the way a client talking to a registry without the referrers API would: the
      // artifacts carry their subject, and an index under `sha256-<hex>` lists them.
      const old1 = await artifact(subject, TYPE_A, { "org.example.n": "old1" });
      const old2 = await artifact(subject, TYPE_B, { "org.example.n": "old2" });
      // An artifact without a subject field is reachable only through the fallback index.
      const detached = await artifact(null, TYPE_A, { "org.example.n": "detached" });
      const fresh = await artifact(subject, TYPE_B, { "org.example.n": "fresh" });
      const fallbackTag = subject.digest.replace(":", "-");
      const path = `/v2/${ns}/referrers/${subject.digest}`;

      await t.step("setup: artifacts and the fallback index push", async () => {
        for (const a of [old1, old2, detached, fresh]) await pushArtifact(s, ns, a);
        const index = imageIndex([old1.desc, old2.desc, detached.desc]);
        await putManifestOk(s, ns, fallbackTag, index, OCI_INDEX);
      });

      await t.step("the listing holds both sources, each referrer once", async () => {
        const p = await page(s, path);
        assertDescriptors(p.manifests, [old1.desc, old2.desc, detached.desc, fresh.desc]);
      });

      await t.step("the filter applies to folded entries too", async () => {
        const pa = await page(s, `${path}?artifactType=${encodeURIComponent(TYPE_A)}`);
        assert.equal(pa.headers.get("oci-filters-applied"), "artifactType");
        assertDescriptors(pa.manifests, [old1.desc, detached.desc]);
        const pb = await page(s, `${path}?artifactType=${encodeURIComponent(TYPE_B)}`);
        assertDescriptors(pb.manifests, [old2.desc, fresh.desc]);
      });

      await t.step("the fallback index is not itself a referrer", async () => {
        const p = await page(s, path);
        assert.equal(p.manifests.filter((d) => d.mediaType === OCI_INDEX).length, 0);
      });
    }),
});
