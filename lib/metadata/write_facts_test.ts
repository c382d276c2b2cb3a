// A metadata write states its facts while it builds each commit; a conflicted commit is rebuilt,
// so the facts (and the jobs planned for them) of lost attempts must not count.
import assert from "node:assert/strict";
import { openTestKv, racingKv } from "../../tests/helpers/kv.ts";
import { K } from "../kv/mod.ts";
import { ManifestMeta, type ManifestWrite } from "./mod.ts";
import type { WriteFact, WriteFacts } from "./write_facts.ts";

const NS = "facts/ns";
const MANIFEST = `sha256:${"d".repeat(64)}`;
const OTHER = `sha256:${"e".repeat(64)}`;

/** Records what each attempt stated and what landed; plans one marker mutation per fact. */
function recording() {
  let pending: WriteFact[] = [];
  const landed: WriteFact[] = [];
  let attempts = 0;
  const facts: WriteFacts = {
    attempt: () => {
      attempts++;
      pending = [];
    },
    mutationsFor: (f) => {
      pending.push(f);
      // A key keys.ts knows (the strict key guard refuses others), one per fact kind.
      return [{ kind: "set", key: K.ns(`fact/${f.kind}`), value: { at: 0 } }];
    },
    landed: () => {
      landed.push(...pending);
      pending = [];
    },
  };
  return { facts, landed, attempts: () => attempts };
}

function write(tags: string[]): ManifestWrite {
  return {
    ns: NS,
    digest: MANIFEST,
    record: { mediaType: "application/vnd.oci.image.manifest.v1+json", size: 100, pushedAt: 1 },
    parsed: {
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      blobs: [],
      layers: [],
      children: [],
    },
    tags,
    tagCreatedAt: 1,
    guard: () => {},
    reserved: null,
    placed: () => Promise.resolve(true),
  };
}

Deno.test("a push that lost a commit race carries the facts of the attempt that landed, once", async () => {
  const t = await openTestKv();
  try {
    const kv = t.kv;
    // Between the push's reads and its first commit, another writer moves the tag.
    const racing = racingKv(
      kv,
      (n) => n === 1 ? kv.set(K.tag(NS, "t"), { digest: OTHER, createdAt: 0 }) : undefined,
    ).kv;
    const r = recording();
    await new ManifestMeta(racing).commit(write(["t"]), r.facts);
    assert.equal(r.attempts(), 2, "the first commit conflicted");
    assert.deepEqual(r.landed.map((f) => f.kind).sort(), [
      "manifest-pushed",
      "revision-added",
      "tag-changed",
    ]);
    const moved = r.landed.find((f) => f.kind === "tag-changed");
    assert.deepEqual(
      moved?.kind === "tag-changed" ? moved.previous : null,
      { digest: OTHER, createdAt: 0 },
      "the fact names what the landed attempt replaced",
    );
    assert.ok((await kv.get(K.ns("fact/revision-added"))).value, "its jobs committed");
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
});

Deno.test("a re-push that changes nothing states no revision or tag fact", async () => {
  const t = await openTestKv();
  try {
    const meta = new ManifestMeta(t.kv);
    await meta.commit(write(["t"]), recording().facts);
    const r = recording();
    await meta.commit(write(["t"]), r.facts);
    assert.deepEqual(r.landed.map((f) => f.kind), ["manifest-pushed"]);
    const d = recording();
    await meta.deleteTag(NS, "t", () => {}, d.facts);
    assert.deepEqual(d.landed, [{ kind: "tag-deleted", ns: NS, tag: "t", digest: MANIFEST }]);
    const rm = recording();
    await meta.deleteRevision({
      ns: NS,
      digest: MANIFEST,
      parsed: write([]).parsed,
      guard: () => {},
      fx: rm.facts,
    });
    assert.deepEqual(rm.landed, [{ kind: "revision-removed", ns: NS, digest: MANIFEST }]);
  } finally {
    await t.close();
  }
});
