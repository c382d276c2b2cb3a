import assert from "node:assert/strict";
import { buildConfig } from "../config/mod.ts";
import { JobQueues } from "../jobs/mod.ts";
import type { WriteFact } from "../metadata/mod.ts";
import type { ParsedManifest } from "../oci/mod.ts";
import { IndexEffects, RECENT_MS } from "./write_effects.ts";

const TAR = "application/vnd.oci.image.layer.v1.tar+gzip";
const d = (c: string) => `sha256:${c.repeat(64)}`;

function revision(digest: string, layers: string[]): WriteFact {
  const parsed: ParsedManifest = {
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    blobs: [d("c"), ...layers],
    layers: layers.map((l) => ({ digest: l, mediaType: TAR })),
    children: [],
  };
  return { kind: "revision-added", ns: "team/app", digest, parsed };
}

/** The layers whose index jobs one manifest push plans, its commit landing (or not). */
async function push(fx: IndexEffects, digest: string, layers: string[], lands = true) {
  const scope = await fx.begin({
    kind: "manifest-push",
    ns: "team/app",
    digest,
    reference: "v1",
    tags: ["v1"],
  });
  assert.ok(scope);
  const fact = revision(digest, layers);
  const mutations = scope.mutationsFor(fact);
  await scope.committed({ landed: lands ? [{ fact, mutations }] : [], unwritten: [] });
  return mutations.filter((m) => m.kind === "set" && (m.value as { kind?: string })?.kind)
    .map((m) => ((m as { value: { payload: { digest: string } } }).value.payload.digest));
}

Deno.test("IndexEffects: a layer queued lately is not queued again by the next manifests; after RECENT_MS, or when the commit did not land, it is", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const cfg = buildConfig({}, []);
    let now = 1_000_000;
    const fx = new IndexEffects(cfg, new JobQueues(kv, cfg.global.jobQueue), () => now);
    assert.deepEqual(await push(fx, d("1"), [d("a"), d("b")], false), [d("a"), d("b")]);
    assert.deepEqual(
      await push(fx, d("2"), [d("a"), d("b")]),
      [d("a"), d("b")],
      "the first did not land",
    );
    assert.deepEqual(await push(fx, d("3"), [d("a"), d("b"), d("e")]), [d("e")]);
    for (let i = 0; i < 20; i++) assert.deepEqual(await push(fx, d("4"), [d("a")]), []);
    now += RECENT_MS;
    assert.deepEqual(await push(fx, d("5"), [d("a"), d("e")]), [d("a"), d("e")]);
  } finally {
    kv.close();
  }
});
