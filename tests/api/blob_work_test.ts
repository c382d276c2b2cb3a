// Issue 25: the fixed per-blob work of a push, counted on a real server through /metrics (the
// KV wrapper's and the blob store's per-operation counters) and pinned, so work added to the
// push path later shows up here instead of as a slower bench run nobody can explain.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, sha256Hex, type TestServer, withServer } from "../helpers/server.ts";
import {
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
} from "../helpers/oci_content.ts";

const SAMPLE = /^(wharf_(?:kv|blob_store)_operation_duration_seconds)_count\{op="([^"]+)"\} (\S+)$/;

/** op counts (`kv.get`, `store.appendUpload`, …) from /metrics. */
async function counts(s: TestServer): Promise<Map<string, number>> {
  const r = await req(s, "/metrics");
  const text = await r.text();
  assert.equal(r.status, 200, text);
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = SAMPLE.exec(line);
    if (!m) continue;
    out.set(`${m[1].startsWith("wharf_kv") ? "kv" : "store"}.${m[2]}`, Number(m[3]));
  }
  return out;
}

const NO_WORKERS = `
[global.job_queue.concurrency]
cache = 0
replication = 0
scan = 0
index = 0
events = 0
`;

let scrape: Record<string, number> = {};

/** The operations `step` caused (those that moved), e.g. `{ "kv.commit": 3 }`. */
async function work(s: TestServer, step: () => Promise<void>): Promise<Record<string, number>> {
  const before = await counts(s);
  await step();
  const after = await counts(s);
  const out: Record<string, number> = {};
  for (const [k, v] of after) {
    const d = v - (before.get(k) ?? 0) - (scrape[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

/** Fails naming every operation over its bound, so one run shows the whole regression. */
function assertAtMost(what: string, got: Record<string, number>, bound: Record<string, number>) {
  console.log(`${what}: ${JSON.stringify(got)}`);
  const over = Object.entries(got).filter(([k, v]) => v > (bound[k] ?? 0));
  assert.deepEqual(over, [], `${what}: over the pinned bound ${JSON.stringify(bound)}`);
}

function blobOf(n: number, seed: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * 31 + seed) & 0xff);
}

async function ok(r: Response, status: number, what: string): Promise<Response> {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${await r.text()}`);
  return r;
}

/** POST: a new upload session in `ns`; its Location. */
async function openSession(s: TestServer, ns: string): Promise<string> {
  const post = await ok(await req(s, `/v2/${ns}/blobs/uploads/`, { method: "POST" }), 202, "POST");
  await post.body?.cancel();
  return post.headers.get("location")!;
}

/** A session's Location with `?digest=` (the completing PUT's URL). */
const withDigest = (loc: string, digest: string) =>
  `${loc}${loc.includes("?") ? "&" : "?"}digest=${digest}`;

Deno.test({
  name: "per-blob work of pushes stays within its pinned counts",
  ...serverTestOpts,
  fn: async (t) => {
    // No queue drained in this process: only the request's own work is counted (the jobs it
    // enqueues are part of its commits; running them is another process's business).
    await withServer({ config: NO_WORKERS }, async (s) => {
      // Warms the namespace (its ns record) and the process, so every case below counts the
      // steady-state work of one more blob.
      await pushBlob(s.url, "work/app", blobOf(1024, 0));
      // What a scrape itself costs (its gauges list and read KV), taken off every count.
      scrape = await work(s, () => Promise.resolve());

      await t.step("(c1) monolithic POST ?digest= of 200 KiB", async () => {
        const data = blobOf(200 << 10, 1);
        const got = await work(s, async () => {
          await pushBlob(s.url, "work/app", data);
        });
        // Before issue 25: 2 gets, 2 getMany, 2 commits (the quota pre-check read usage with no
        // quota configured; the link commit read the link again); then 1 get, 1 getMany, 2
        // commits (the link and the usage read apart).
        assertAtMost("POST ?digest", got, {
          // link/<ns>/<digest> (does the namespace have it already? then nothing is written) with
          // the repository usage (qref, usage, qwriter) a new link adds to, kept even without
          // quotas: the link commit checks these very entries
          "kv.getMany": 1,
          // blob reservation (scrub cannot claim the digest), then the link with its jobs
          "kv.commit": 2,
          // the body into an upload file (synced), then renamed to its blob path; before issue
          // 25 a deleteUpload followed even on success (a no-op, now only after a failure)
          "store.appendUpload": 1,
          "store.commitUpload": 1,
        });
      });

      await t.step("(c2) Docker's flow: POST, then PUT ?digest= with the body", async () => {
        const data = blobOf(200 << 10, 2);
        const digest = `sha256:${await sha256Hex(data)}`;
        const got = await work(s, async () => {
          const loc = await openSession(s, "work/app");
          const put = await ok(
            await req(s, withDigest(loc, digest), {
              method: "PUT",
              body: data as BodyInit,
              headers: { "content-type": "application/octet-stream" },
            }),
            201,
            "PUT",
          );
          await put.body?.cancel();
        });
        // Before issue 25: 3 gets, 1 getMany, 1 set, 3 commits (PUT committed the final chunk's
        // offset, then re-read the session, then deleted it in the link commit).
        assertAtMost("POST + PUT ?digest", got, {
          // PUT reads the session with the link and the repository usage its commit checks
          "kv.getMany": 1,
          // POST: the session; PUT: the reservation, the link deleting the session
          "kv.set": 1,
          "kv.commit": 2,
          // PUT appends the body (creating the upload file: POST leaves it to the first
          // append since issue 25) and places it
          "store.appendUpload": 1,
          "store.commitUpload": 1,
        });
      });

      await t.step("(c3) chunked: POST, 3 PATCHes, PUT ?digest=", async () => {
        const data = blobOf(300 << 10, 3);
        const digest = `sha256:${await sha256Hex(data)}`;
        const got = await work(s, async () => {
          let loc = await openSession(s, "work/app");
          const third = data.length / 3;
          for (let i = 0; i < 3; i++) {
            const chunk = data.subarray(i * third, (i + 1) * third);
            const r = await ok(
              await req(s, loc, {
                method: "PATCH",
                body: chunk as BodyInit,
                headers: {
                  "content-type": "application/octet-stream",
                  "content-range": `${i * third}-${(i + 1) * third - 1}`,
                },
              }),
              202,
              `PATCH ${i}`,
            );
            await r.body?.cancel();
            loc = r.headers.get("location")!;
          }
          const put = await ok(
            await req(s, withDigest(loc, digest), { method: "PUT" }),
            201,
            "PUT",
          );
          await put.body?.cancel();
        });
        // Before issue 25: 8 gets, 1 getMany (each PATCH re-read the session it had just
        // written; PUT read the session, then the link).
        assertAtMost("POST + 3 PATCH + PUT", got, {
          // each PATCH reads the session; PUT reads it with the link and repository usage
          "kv.get": 3,
          "kv.getMany": 1,
          "kv.set": 1,
          // 3 offsets, the reservation, the link
          "kv.commit": 5,
          // the 3 PATCHes and the PUT (POST creates no file)
          "store.appendUpload": 4,
          "store.commitUpload": 1,
        });
      });

      await t.step("(d) manifest PUT with 5 layers (blobs pushed before)", async () => {
        const configBytes = jsonBytes({ architecture: "amd64", os: "linux" });
        const config = await pushBlob(s.url, "work/app", configBytes);
        const layers = [];
        for (let i = 0; i < 5; i++) {
          const b = blobOf(4096, 10 + i);
          layers.push({
            mediaType: OCI_LAYER,
            digest: await pushBlob(s.url, "work/app", b),
            size: b.length,
          });
        }
        const body = imageManifest(
          { mediaType: OCI_CONFIG, digest: config, size: configBytes.length },
          layers,
        );
        const got = await work(s, async () => {
          const r = await ok(
            await req(s, "/v2/work/app/manifests/v1", {
              method: "PUT",
              body: body as BodyInit,
              headers: { "content-type": OCI_MANIFEST },
            }),
            201,
            "manifest PUT",
          );
          await r.body?.cancel();
        });
        // Before issue 25: 2 gets, 3 getMany, 1 commit (the tag was read twice; the revision
        // and tagver one by one); then 3 getMany, 1 commit (the tag, the revision and the usage
        // read apart).
        assertAtMost("manifest PUT, 5 layers", got, {
          // the tag (its guard, and the commit's check) with the revision, tagver and the
          // repository usage a new revision adds to, in one read
          "kv.getMany": 1,
          // revision, tag, references and jobs in one commit
          "kv.commit": 1,
        });
      });
    });
  },
});

Deno.test({
  name: "a PUT refused for its digest keeps its final chunk, as a PATCH would",
  ...serverTestOpts,
  fn: () =>
    withServer({}, async (s) => {
      const data = blobOf(100, 7);
      const digest = `sha256:${await sha256Hex(data)}`;
      const loc = await openSession(s, "work/keep");
      const at = (d: string) => withDigest(loc, d);
      const wrong = `sha256:${"0".repeat(64)}`;
      const bad = await req(s, at(wrong), {
        method: "PUT",
        body: data as BodyInit,
        headers: { "content-type": "application/octet-stream" },
      });
      assert.equal(bad.status, 400);
      assert.equal((await bad.json()).errors[0].code, "DIGEST_INVALID");
      // As after a PATCH of the same bytes: the session holds them and completes without a body.
      const status = await req(s, loc);
      await status.body?.cancel();
      assert.equal(status.status, 204);
      assert.equal(status.headers.get("range"), "0-99");
      const put = await ok(await req(s, at(digest), { method: "PUT" }), 201, "PUT");
      await put.body?.cancel();
      const got = await req(s, `/v2/work/keep/blobs/${digest}`);
      assert.equal(got.status, 200);
      assert.deepEqual(new Uint8Array(await got.arrayBuffer()), data);
    }),
});
