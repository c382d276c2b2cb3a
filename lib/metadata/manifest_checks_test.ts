// What each manifest write checks (manifest_writes.ts): only the keys whose change would make it
// wrong. A delete by digest conflicts with a tag write of ITS revision (revtagver), never with
// one of another revision; a push naming many tags, and the release of a held image's few tags
// (signature_meta.ts), check each of them, never the namespace's tagver. Each test races one write between the reads and the commit of the write under test
// and counts that write's commits.
import assert from "node:assert/strict";
import { openTestKv, racingKv, type TestKv } from "../../tests/helpers/kv.ts";
import { CommitBudget, K, type SignatureVerdict, type TagRecord } from "../kv/mod.ts";
import { ManifestMeta, type ManifestWrite, NO_FACTS, SignatureMeta } from "./mod.ts";

const NS = "checks/ns";
const digestOf = (c: string) => `sha256:${c.repeat(64)}`;
const R1 = digestOf("1");
const R2 = digestOf("2");
const R3 = digestOf("3");

function write(digest: string, tags: string[]): ManifestWrite {
  return {
    ns: NS,
    digest,
    record: { mediaType: "application/vnd.oci.image.manifest.v1+json", size: 100, pushedAt: 1 },
    parsed: {
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      blobs: [],
      layers: [],
      children: [],
    },
    tags,
    tagCreatedAt: Date.now(),
    guard: () => {},
    reserved: null,
    placed: () => Promise.resolve(true),
  };
}

/**
 * `t.kv` for the write under test: before its commit number `at` (1-based) `race` runs on the
 * KV itself; `outcomes` lists whether each of its commits landed.
 */
function raced(t: TestKv, at: number, race: () => Promise<void>) {
  return racingKv(t.kv, (n) => n === at ? race() : undefined);
}

async function withKv(fn: (t: TestKv, meta: ManifestMeta) => Promise<void>): Promise<void> {
  const t = await openTestKv();
  try {
    await fn(t, new ManifestMeta(t.kv));
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

const deleteOf = (meta: ManifestMeta, digest: string) =>
  meta.deleteRevision({
    ns: NS,
    digest,
    parsed: write(digest, []).parsed,
    guard: () => {},
    fx: NO_FACTS,
  });

async function tagsOf(t: TestKv): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const e of t.kv.list<TagRecord>({ prefix: K.tags(NS) })) {
    out[e.key[2] as string] = e.value.digest;
  }
  return out;
}

/** Every tag names a revision that exists and has its tagrev; no tagrev without its tag. */
async function assertConsistent(t: TestKv): Promise<void> {
  const tags = await tagsOf(t);
  for (const [tag, digest] of Object.entries(tags)) {
    assert.ok((await t.kv.get(K.rev(NS, digest))).value, `${tag} names a missing revision`);
    assert.ok((await t.kv.get(K.tagrev(NS, digest, tag))).value, `${tag} has no tagrev`);
  }
  for await (const e of t.kv.list({ prefix: K.tagrevsIn(NS) })) {
    const [, , digest, tag] = e.key as string[];
    assert.equal(tags[tag], digest, `tagrev ${digest}/${tag} without its tag`);
  }
}

Deno.test("a delete by digest does not conflict with a retag of another revision", () =>
  withKv(async (t, meta) => {
    await meta.commit(write(R1, ["old"]), NO_FACTS);
    await meta.commit(write(R2, ["latest"]), NO_FACTS);
    await meta.commit(write(R3, []), NO_FACTS);
    // `latest` moves R2 → R3 between the delete's reads and its commit (tagver moves with it).
    const tagver = (await t.kv.get(K.tagver(NS))).versionstamp;
    const r = raced(t, 1, () => meta.commit(write(R3, ["latest"]), NO_FACTS));
    await deleteOf(new ManifestMeta(r.kv), R1);
    assert.notEqual((await t.kv.get(K.tagver(NS))).versionstamp, tagver);
    assert.deepEqual(r.outcomes, [true], "the delete's one commit landed");
    assert.equal(await meta.revision(NS, R1), null);
    assert.deepEqual(await tagsOf(t), { latest: R3 });
    await assertConsistent(t);
  }));

Deno.test("a delete by digest conflicts with a tag pointed at its revision, and takes it too", () =>
  withKv(async (t, meta) => {
    await meta.commit(write(R1, ["a"]), NO_FACTS);
    await meta.commit(write(R2, ["latest"]), NO_FACTS);
    // A retag of R1 itself lands between the delete's reads and its commit.
    const r = raced(t, 1, () => meta.commit(write(R1, ["latest"]), NO_FACTS));
    await deleteOf(new ManifestMeta(r.kv), R1);
    assert.deepEqual(r.outcomes, [false, true], "retried once, then landed");
    assert.equal(await meta.revision(NS, R1), null);
    assert.deepEqual(await tagsOf(t), {}, "both tags of R1 went, `latest` included");
    assert.equal((await t.kv.get(K.revTagVersion(NS, R1))).versionstamp, null, "gone with it");
    await assertConsistent(t);
  }));

Deno.test("a delete by digest conflicts with a tag moved off its revision, and leaves that tag", () =>
  withKv(async (t, meta) => {
    await meta.commit(write(R1, ["a", "b"]), NO_FACTS);
    await meta.commit(write(R2, []), NO_FACTS);
    // `a` moves R1 → R2: deleting it now would delete R2's tag.
    const r = raced(t, 1, () => meta.commit(write(R2, ["a"]), NO_FACTS));
    await deleteOf(new ManifestMeta(r.kv), R1);
    assert.deepEqual(r.outcomes, [false, true]);
    assert.deepEqual(await tagsOf(t), { a: R2 });
    await assertConsistent(t);
  }));

Deno.test("a delete by digest conflicts with a tag delete of its revision, not of another's", () =>
  withKv(async (t, meta) => {
    await meta.commit(write(R1, ["a", "b"]), NO_FACTS);
    await meta.commit(write(R2, ["c"]), NO_FACTS);
    const other = raced(t, 1, () => meta.deleteTag(NS, "c", () => {}, NO_FACTS));
    await deleteOf(new ManifestMeta(other.kv), R1);
    assert.deepEqual(other.outcomes, [true]);
    await meta.commit(write(R1, ["a", "b"]), NO_FACTS);
    const own = raced(t, 1, () => meta.deleteTag(NS, "a", () => {}, NO_FACTS));
    await deleteOf(new ManifestMeta(own.kv), R1);
    assert.deepEqual(own.outcomes, [false, true]);
    assert.deepEqual(await tagsOf(t), {});
    await assertConsistent(t);
  }));

Deno.test("a revision stored before revtagver existed (no such key) is deleted, a racing retag of it caught", () =>
  withKv(async (t, meta) => {
    // What today's main writes for a tagged revision: no revtagver key.
    const rec = write(R1, []).record;
    await t.kv.atomic()
      .set(K.rev(NS, R1), rec)
      .set(K.tag(NS, "a"), { digest: R1, createdAt: 1 } satisfies TagRecord)
      .set(K.tagrev(NS, R1, "a"), true)
      .set(K.tagver(NS), true)
      .set(K.ns(NS), { at: 1 })
      .commit();
    await meta.commit(write(R2, ["b"]), NO_FACTS);
    const unrelated = raced(t, 1, () => meta.commit(write(R2, ["c"]), NO_FACTS));
    // Absent reads as "never changed": a write to another revision leaves it so.
    await deleteOf(new ManifestMeta(unrelated.kv), R1);
    assert.deepEqual(unrelated.outcomes, [true]);
    assert.deepEqual(await tagsOf(t), { b: R2, c: R2 });
    await t.kv.atomic()
      .set(K.rev(NS, R1), rec)
      .set(K.tag(NS, "a"), { digest: R1, createdAt: 1 } satisfies TagRecord)
      .set(K.tagrev(NS, R1, "a"), true)
      .commit();
    const own = raced(t, 1, () => meta.commit(write(R1, ["d"]), NO_FACTS));
    await deleteOf(new ManifestMeta(own.kv), R1);
    assert.deepEqual(own.outcomes, [false, true], "the first write of the key fails the check");
    assert.deepEqual(await tagsOf(t), { b: R2, c: R2 });
    await assertConsistent(t);
  }));

Deno.test("a push of many tags checks its own tags, one by one, never the namespace's tagver", () =>
  withKv(async (t, meta) => {
    const many = Array.from({ length: 30 }, (_, i) => `v${i}`);
    await meta.commit(write(R2, ["latest"]), NO_FACTS);
    // Another tag of the namespace moves before each of the push's commits.
    const r = racingKv(
      t.kv,
      (n) => meta.commit(write(n % 2 ? R3 : R2, ["latest"]), NO_FACTS),
    );
    await new ManifestMeta(r.kv).commit(write(R1, many), NO_FACTS);
    assert.ok(r.outcomes.length >= 4, `${r.outcomes.length} commits for 30 tags`);
    assert.ok(r.outcomes.every((ok) => ok), `no commit conflicted: ${r.outcomes}`);
    const tags = await tagsOf(t);
    for (const tag of many) assert.equal(tags[tag], R1);
    await assertConsistent(t);
  }));

Deno.test("a push of many tags retries a commit whose own tag moved, and the tag ends consistent", () =>
  withKv(async (t, meta) => {
    const many = Array.from({ length: 20 }, (_, i) => `v${i}`);
    await meta.commit(write(R2, ["v15"]), NO_FACTS);
    // v15 is in a later commit than the head: it moves again just before that commit.
    const r = raced(t, 2, () => meta.commit(write(R3, ["v15"]), NO_FACTS));
    await new ManifestMeta(r.kv).commit(write(R1, many), NO_FACTS);
    assert.ok(r.outcomes.includes(false), `a commit conflicted: ${r.outcomes}`);
    const tags = await tagsOf(t);
    for (const tag of many) assert.equal(tags[tag], R1);
    assert.equal((await t.kv.get(K.tagrev(NS, R3, "v15"))).value, null, "R3 lost it cleanly");
    await assertConsistent(t);
  }));

Deno.test("tag writes rewrite the revtagver of the revisions they join and leave, once per commit", () =>
  withKv(async (t, meta) => {
    await meta.commit(write(R1, ["a", "b"]), NO_FACTS);
    const created = (await t.kv.get(K.revTagVersion(NS, R1))).versionstamp;
    assert.equal(created, null, "a revision created with its tags needs none yet");
    await meta.commit(write(R2, []), NO_FACTS);
    await meta.commit(write(R2, ["a", "b"]), NO_FACTS);
    const left = await t.kv.get(K.revTagVersion(NS, R1));
    const joined = await t.kv.get(K.revTagVersion(NS, R2));
    assert.ok(left.versionstamp && joined.versionstamp);
    assert.equal(left.versionstamp, joined.versionstamp, "both in the one commit");
    await meta.deleteTag(NS, "a", () => {}, NO_FACTS);
    assert.notEqual((await t.kv.get(K.revTagVersion(NS, R2))).versionstamp, joined.versionstamp);
    assert.equal((await t.kv.get(K.revTagVersion(NS, R1))).versionstamp, left.versionstamp);
  }));

/** A held verdict with `tags` waiting, and the verified one its release stores. */
function heldAndVerified(tags: string[]): { held: SignatureVerdict; verified: SignatureVerdict } {
  const held: SignatureVerdict = {
    state: "unverified",
    fingerprint: "f",
    checkedAt: 1,
    signers: [],
    held: { since: 1, until: Date.now() + 60_000, tags, tagCreatedAt: 1 },
  };
  const { held: _, ...verified } = { ...held, state: "verified" as const };
  return { held, verified };
}

Deno.test("a held image's release checks the tags it writes, not the namespace's tagver", () =>
  withKv(async (t, meta) => {
    const sig = new SignatureMeta(t.kv);
    const { held: verdict, verified } = heldAndVerified(["a", "b"]);
    // R1 pushed into an enforce repository: held, `a` and `b` waiting for its signature.
    await meta.commit({ ...write(R1, []), head: sig.pushMutations(NS, R1, verdict) }, NO_FACTS);
    await meta.commit(write(R2, ["latest", "b"]), NO_FACTS);
    const release = async (race: () => Promise<void>) => {
      const r = raced(t, 1, race);
      const pin = await sig.pin(NS, R1);
      const out = await new SignatureMeta(r.kv).settle({
        ns: NS,
        digest: R1,
        pin,
        next: verified,
        fx: NO_FACTS,
      });
      return { outcomes: r.outcomes, out };
    };
    // `latest` moves R2 → R3 while the release commits: nothing it decides on.
    await meta.commit(write(R3, []), NO_FACTS);
    const quiet = await release(() => meta.commit(write(R3, ["latest"]), NO_FACTS));
    assert.deepEqual(quiet.outcomes, [true]);
    assert.ok(typeof quiet.out !== "string");
    assert.deepEqual(quiet.out.released, ["a", "b"]);
    assert.deepEqual(await tagsOf(t), { a: R1, b: R1, latest: R3 });
    assert.ok((await t.kv.get(K.revTagVersion(NS, R2))).versionstamp, "R2 heard `b` leave");
    await assertConsistent(t);

    // Held again, `b` waiting; `b` itself moves while the release commits: it reads again.
    await sig.settle({
      ns: NS,
      digest: R1,
      pin: await sig.pin(NS, R1),
      next: verdict,
      fx: NO_FACTS,
    });
    await t.kv.set(K.heldTag(NS, "b"), { digest: R1, at: 1, pushedBy: null });
    await meta.commit(write(R2, ["b"]), NO_FACTS);
    const raced2 = await release(() => meta.commit(write(R3, ["b"]), NO_FACTS));
    assert.deepEqual(raced2.outcomes, [false, true]);
    assert.deepEqual(await tagsOf(t), { a: R1, b: R1, latest: R3 });
    await assertConsistent(t);
  }));

Deno.test("a release rides in another push's commit (alongside), whole or not at all", () =>
  withKv(async (t, meta) => {
    const sig = new SignatureMeta(t.kv);
    const { held: verdict, verified } = heldAndVerified(["a"]);
    await meta.commit({ ...write(R1, []), head: sig.pushMutations(NS, R1, verdict) }, NO_FACTS);
    // R2 (a signature of R1) pushed with R1's release riding in its commit, judged at `pin`.
    const push = async (
      digest: string,
      tag: string,
      race: (n: number) => unknown = () => {},
    ) => {
      const pin = await sig.pin(NS, R1);
      const racing = racingKv(t.kv, race);
      let added = "";
      let landed = false;
      const w: ManifestWrite = {
        ...write(digest, [tag]),
        alongside: {
          add: async (op, budget, spare) => {
            const did = await new SignatureMeta(racing.kv).settleInto(
              { ns: NS, digest: R1, pin, next: verified, fx: NO_FACTS },
              op,
              budget,
              spare,
            );
            added = typeof did === "string" ? did : "added";
          },
          landed: () => (landed = true),
        },
      };
      await new ManifestMeta(racing.kv).commit(w, NO_FACTS);
      return { outcomes: racing.outcomes, added, landed };
    };
    // Another signature of R1 lands between this push's reads and its commit: the commit fails
    // on R1's pin, the retry finds it moved and leaves the release out; the push itself lands.
    const another = () => t.kv.set(K.sigVersion(NS, R1), true); // what its commit writes
    const stale = await push(R2, "sig-a", (n) => n === 1 ? another() : undefined);
    assert.deepEqual(stale.outcomes, [false, true]);
    assert.equal(stale.added, "stale");
    assert.deepEqual(await tagsOf(t), { "sig-a": R2 }, "R1 still held: `a` not written");
    // Undisturbed: one commit writes the signature's tag, R1's verdict and its released tag.
    const quiet = await push(R3, "sig-b");
    assert.deepEqual(quiet.outcomes, [true]);
    assert.deepEqual([quiet.added, quiet.landed], ["added", true]);
    assert.deepEqual(await tagsOf(t), { "sig-a": R2, "sig-b": R3, a: R1 });
    const [a, b, v] = await t.kv.getMany([
      K.tag(NS, "a"),
      K.tag(NS, "sig-b"),
      K.sigVerdict(NS, R1),
    ]);
    assert.equal(a.versionstamp, b.versionstamp, "released in the push's own commit");
    assert.equal((v.value as SignatureVerdict).state, "verified");
    await assertConsistent(t);
  }));

Deno.test("settleInto adds nothing when its checks would not fit beside the commit's", () =>
  withKv(async (t) => {
    const sig = new SignatureMeta(t.kv);
    const { held, verified } = heldAndVerified([]);
    await new ManifestMeta(t.kv).commit(
      { ...write(R1, []), head: sig.pushMutations(NS, R1, held) },
      NO_FACTS,
    );
    const op = t.kv.atomic();
    const budget = new CommitBudget();
    for (let i = 0; i < 8; i++) budget.check(["filler", i]);
    const settle = { ns: NS, digest: R1, pin: await sig.pin(NS, R1), next: verified, fx: NO_FACTS };
    // 8 checks taken and 1 kept spare: its two (revision, pin) do not fit.
    assert.equal(await sig.settleInto(settle, op, budget, 1), "full");
    assert.deepEqual([budget.checks, budget.mutations], [8, 0]);
    assert.ok((await op.commit()).ok);
    assert.equal((await sig.verdict(NS, R1))?.state, "unverified");
    // With no spare kept, they fit.
    const op2 = t.kv.atomic();
    const did = await sig.settleInto(settle, op2, budget, 0);
    assert.ok(typeof did !== "string");
    assert.ok((await op2.commit()).ok);
    assert.equal((await sig.verdict(NS, R1))?.state, "verified");
  }));
