// Scrub under load: several clients push (monolithic and chunked) and delete images that share
// layers, while `main.ts scrub` runs again and again as a separate process against the same KV
// file and blob directory with no grace period. Writers that race a reclamation get 503
// RECLAMATION_IN_PROGRESS + Retry-After and retry. Afterwards every reachable manifest must
// pull byte for byte, and no unreferenced blob may survive the final scrub.
import assert from "node:assert/strict";
import { join } from "node:path";
import { runCli, sha256Hex, startServer, type TestServer } from "../helpers/server.ts";
import { serverTestOpts } from "../helpers/api.ts";
import { storedBlobs } from "../helpers/stored_blobs.ts";
import {
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
} from "../helpers/oci_content.ts";

const enc = new TextEncoder();
const LOAD_MS = 8_000;
const WORKERS = 4;

let reclaiming503 = 0;

/** Sends a write, retrying while the registry answers 503 RECLAMATION_IN_PROGRESS. */
async function write(make: () => Promise<Response>): Promise<Response> {
  for (let i = 0; i < 50; i++) {
    const r = await make();
    if (r.status !== 503) return r;
    const body = await r.json();
    assert.equal(body.errors[0].code, "RECLAMATION_IN_PROGRESS");
    assert.ok(Number(r.headers.get("retry-after")) > 0, "503 carries Retry-After");
    reclaiming503++;
    await new Promise((res) => setTimeout(res, 20));
  }
  throw new Error("still reclaiming after 50 tries");
}

async function pushMonolithic(s: TestServer, ns: string, data: Uint8Array): Promise<string> {
  const digest = `sha256:${await sha256Hex(data)}`;
  const r = await write(() =>
    fetch(`${s.url}/v2/${ns}/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      body: data as BodyInit,
      headers: { "content-type": "application/octet-stream" },
    })
  );
  await r.body?.cancel();
  assert.equal(r.status, 201, `monolithic push of ${digest}`);
  return digest;
}

/** POST + PATCH + PUT; a 503 on completion drops the session, so the retry starts over. */
async function pushChunked(s: TestServer, ns: string, data: Uint8Array): Promise<string> {
  const digest = `sha256:${await sha256Hex(data)}`;
  const r = await write(async () => {
    const post = await fetch(`${s.url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
    await post.body?.cancel();
    assert.equal(post.status, 202);
    const loc = new URL(post.headers.get("location")!, s.url);
    const patch = await fetch(loc, {
      method: "PATCH",
      body: data as BodyInit,
      headers: { "content-type": "application/octet-stream" },
    });
    await patch.body?.cancel();
    assert.equal(patch.status, 202);
    const put = new URL(patch.headers.get("location")!, s.url);
    put.searchParams.set("digest", digest);
    return await fetch(put, { method: "PUT" });
  });
  assert.equal(r.status, 201, `chunked push of ${digest}: ${await r.text()}`);
  return digest;
}

interface Pushed {
  ns: string;
  digest: string;
  blobs: string[];
}

async function pushImage(s: TestServer, ns: string, tag: string, seq: number): Promise<Pushed> {
  // Layers come from a small pool so digests are deleted and re-pushed across clients, which
  // is exactly the window where a push meets a reclamation.
  const shared = enc.encode(`shared layer ${seq % 3}`);
  const own = enc.encode(`own layer ${ns} ${tag} ${seq}`);
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", seq: seq % 5 });
  const sharedD = await (seq % 2 ? pushChunked : pushMonolithic)(s, ns, shared);
  const ownD = await pushChunked(s, ns, own);
  const cfgD = await pushMonolithic(s, ns, cfg);
  // Every fourth manifest is big enough to live in the blob store rather than inline in KV.
  const pad = seq % 4 === 0 ? { annotations: { pad: "p".repeat(60_000) } } : {};
  const body = imageManifest(
    { mediaType: OCI_CONFIG, digest: cfgD, size: cfg.length },
    [
      { mediaType: OCI_LAYER, digest: sharedD, size: shared.length },
      { mediaType: OCI_LAYER, digest: ownD, size: own.length },
    ],
    pad,
  );
  const r = await write(() =>
    fetch(`${s.url}/v2/${ns}/manifests/${tag}`, {
      method: "PUT",
      body: body as BodyInit,
      headers: { "content-type": OCI_MANIFEST },
    })
  );
  await r.body?.cancel();
  assert.equal(r.status, 201, `manifest ${ns}:${tag}`);
  return { ns, digest: `sha256:${await sha256Hex(body)}`, blobs: [cfgD, sharedD, ownD] };
}

/** Deletes the revision, then each blob; 405 means another manifest of ns still uses it. */
async function deleteImage(s: TestServer, p: Pushed): Promise<void> {
  const r = await fetch(`${s.url}/v2/${p.ns}/manifests/${p.digest}`, { method: "DELETE" });
  await r.body?.cancel();
  assert.ok(r.status === 202 || r.status === 404, `delete manifest: ${r.status}`);
  for (const b of p.blobs) {
    const d = await fetch(`${s.url}/v2/${p.ns}/blobs/${b}`, { method: "DELETE" });
    await d.body?.cancel();
    assert.ok([202, 404, 405].includes(d.status), `delete blob: ${d.status}`);
  }
}

async function scrubOnce(s: TestServer): Promise<string> {
  const out = await runCli(s, "scrub");
  const text = out.stdout + out.stderr;
  // Exit 1 only when another scrub held the lease, which cannot happen here (one at a time).
  assert.equal(out.code, 0, text);
  return text;
}

async function fetchBytes(url: string): Promise<Uint8Array> {
  const r = await fetch(url);
  assert.equal(r.status, 200, url);
  return new Uint8Array(await r.arrayBuffer());
}

Deno.test({
  name: "scrub: concurrent pushes and deletes while scrub runs repeatedly lose nothing reachable",
  ...serverTestOpts,
  async fn() {
    const s = await startServer({ config: "[global.scrub]\ngrace_secs = 0\n" });
    try {
      const deadline = Date.now() + LOAD_MS;
      const kept: Pushed[] = [];
      let pushes = 0;
      let scrubs = 0;
      const worker = async (w: number) => {
        for (let seq = 0; Date.now() < deadline; seq++) {
          const ns = `load/w${w % 2}`; // two workers per namespace
          const p = await pushImage(s, ns, `t${w}-${seq}`, seq);
          pushes++;
          if (seq % 3 === 2) kept.push(p);
          else await deleteImage(s, p);
        }
      };
      const scrubber = async () => {
        while (Date.now() < deadline) {
          await scrubOnce(s);
          scrubs++;
        }
      };
      await Promise.all([...Array.from({ length: WORKERS }, (_, w) => worker(w)), scrubber()]);
      const final = await scrubOnce(s);
      console.log(
        `${pushes} images pushed, ${kept.length} kept, ${scrubs} concurrent scrubs, ` +
          `${reclaiming503} writes answered 503 and retried; final: ${final.trim()}`,
      );
      assert.ok(pushes > 10 && scrubs > 2, "the load actually overlapped");

      // Every kept manifest (and every tag the registry still lists) pulls byte for byte.
      const referenced = new Set<string>();
      for (const p of kept) {
        const m = await fetchBytes(`${s.url}/v2/${p.ns}/manifests/${p.digest}`);
        assert.equal(`sha256:${await sha256Hex(m)}`, p.digest);
        if (m.length > 48 * 1024) referenced.add(p.digest);
        for (const b of p.blobs) {
          const bytes = await fetchBytes(`${s.url}/v2/${p.ns}/blobs/${b}`);
          assert.equal(`sha256:${await sha256Hex(bytes)}`, b, `blob ${b} of ${p.ns}`);
          referenced.add(b);
        }
      }
      for (const ns of ["load/w0", "load/w1"]) {
        const r = await fetch(`${s.url}/v2/${ns}/tags/list`);
        const tags: string[] = r.status === 200 ? (await r.json()).tags : [];
        if (r.status !== 200) await r.body?.cancel();
        const keptTags = kept.filter((p) => p.ns === ns).length;
        assert.equal(tags.length, keptTags, `${ns} lists exactly the kept images`);
      }
      // No unreferenced bytes survive the final scrub (grace 0).
      for await (const d of storedBlobs(s)) {
        assert.ok(referenced.has(d), `unreferenced blob ${d} survived the final scrub`);
      }
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "scrub: --dry-run reports without deleting; the summary is one line",
  ...serverTestOpts,
  async fn() {
    const s = await startServer({ config: "[global.scrub]\ngrace_secs = 0\n" });
    try {
      const d = await pushMonolithic(s, "dry/run", enc.encode("to be reclaimed"));
      const del = await fetch(`${s.url}/v2/dry/run/blobs/${d}`, { method: "DELETE" });
      await del.body?.cancel();
      assert.equal(del.status, 202);
      const out = await runCli(s, "scrub", ["--dry-run"]);
      const text = out.stdout.trim();
      assert.equal(out.code, 0);
      assert.equal(text.split("\n").length, 1);
      assert.match(text, /dry run.*1 blob\(s\) reclaimable \(15 bytes\)/);
      const files: string[] = [];
      for await (const f of storedBlobs(s)) files.push(f);
      assert.deepEqual(files, [d]);
      assert.match(await scrubOnce(s), /1 blob\(s\) reclaimed \(15 bytes\)/);
      const gone = await fetch(`${s.url}/v2/dry/run/blobs/${d}`);
      await gone.body?.cancel();
      assert.equal(gone.status, 404);
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "scrub: a push racing a claimed digest answers 503 RECLAMATION_IN_PROGRESS + Retry-After",
  ...serverTestOpts,
  async fn() {
    const s = await startServer();
    try {
      const data = enc.encode("claimed by a scrub in another process");
      const digest = `sha256:${await sha256Hex(data)}`;
      // Claim the digest the way scrub does, from this (second) process on the same KV file.
      const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
      await kv.set(["reclaim", digest], { at: Date.now() });
      const post = () =>
        fetch(`${s.url}/v2/race/x/blobs/uploads/?digest=${digest}`, {
          method: "POST",
          body: data as BodyInit,
        });
      const r = await post();
      assert.equal(r.status, 503);
      assert.equal(r.headers.get("retry-after"), "2");
      assert.equal((await r.json()).errors[0].code, "RECLAMATION_IN_PROGRESS");
      // Chunked completion is refused the same way, before its bytes move: the session stays
      // and the same PUT succeeds once the claim is gone.
      const start = await fetch(`${s.url}/v2/race/x/blobs/uploads/`, { method: "POST" });
      await start.body?.cancel();
      const loc = new URL(start.headers.get("location")!, s.url);
      const patch = await fetch(loc, { method: "PATCH", body: data as BodyInit });
      await patch.body?.cancel();
      assert.equal(patch.status, 202);
      const putUrl = new URL(patch.headers.get("location")!, s.url);
      putUrl.searchParams.set("digest", digest);
      const put = await fetch(putUrl, { method: "PUT" });
      assert.equal(put.status, 503);
      assert.equal(put.headers.get("retry-after"), "2");
      await put.body?.cancel();
      const status = await fetch(loc);
      await status.body?.cancel();
      assert.equal(status.status, 204, "the session survives the refusal");
      assert.equal(status.headers.get("range"), `0-${data.length - 1}`);
      const head = await fetch(`${s.url}/v2/race/x/blobs/${digest}`, { method: "HEAD" });
      assert.equal(head.status, 404, "nothing was linked");
      // Once the claim is gone the same push succeeds.
      await kv.delete(["reclaim", digest]);
      kv.close();
      const done = await fetch(putUrl, { method: "PUT" });
      await done.body?.cancel();
      assert.equal(done.status, 201);
      const ok = await post();
      await ok.body?.cancel();
      assert.equal(ok.status, 201);
      const got = await fetch(`${s.url}/v2/race/x/blobs/${digest}`);
      assert.deepEqual(new Uint8Array(await got.arrayBuffer()), data);
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "scrub: [global.scrub] interval_secs runs scrub in the server; /metrics shows its results",
  ...serverTestOpts,
  async fn() {
    const s = await startServer({
      config: "[global.scrub]\ninterval_secs = 1\ngrace_secs = 0\n",
    });
    try {
      const d = await pushMonolithic(s, "sched/x", enc.encode("reclaimed by the server itself"));
      const del = await fetch(`${s.url}/v2/sched/x/blobs/${d}`, { method: "DELETE" });
      await del.body?.cancel();
      assert.equal(del.status, 202);
      let text = "";
      for (let i = 0; i < 50; i++) {
        await new Promise((r) => setTimeout(r, 200));
        text = await (await fetch(`${s.url}/metrics`)).text();
        if (/wharf_scrub_reclaimed_total\{kind="blobs"\} [1-9]/.test(text)) break;
      }
      assert.match(text, /wharf_scrub_runs_total\{result="ok"\} [1-9]/);
      assert.match(text, /wharf_scrub_reclaimed_total\{kind="blobs"\} 1\b/);
      assert.match(text, /wharf_scrub_reclaimed_total\{kind="bytes"\} 30\b/);
      assert.match(text, /wharf_scrub_last_run_timestamp_seconds \d/);
      const files: string[] = [];
      for await (const f of storedBlobs(s)) files.push(f);
      assert.deepEqual(files, []);
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "scrub: pull history beyond max_pulls is dropped, the newest entries stay",
  ...serverTestOpts,
  async fn() {
    const s = await startServer({ config: "[global]\nupdate_pull_time = true\nmax_pulls = 2\n" });
    try {
      const img = await pushImage(s, "pulls/app", "v1", 1);
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`${s.url}/v2/pulls/app/manifests/v1`);
        await r.body?.cancel();
        assert.equal(r.status, 200);
      }
      const list = async () => {
        const r = await fetch(`${s.url}/v2/pulls/app/_svc/pulls/list?tag=v1`);
        assert.equal(r.status, 200);
        return await r.json();
      };
      assert.equal((await list()).entries.length, 5);
      await new Promise((r) => setTimeout(r, 100)); // recordings are batched for up to 20 ms
      assert.match(await scrubOnce(s), / 3 pull\(s\)/);
      const after = await list();
      assert.equal(after.max_pulls, 2);
      assert.equal(after.entries.length, 2);
      assert.ok(after.entries[0].at >= after.entries[1].at, "newest first");
      assert.ok(img.digest);
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
