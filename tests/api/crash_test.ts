// Crash safety: the server is SIGKILLed at a random moment while several clients push images,
// move tags, delete tags and upload in chunks; after each restart everything a client was told
// succeeded must be there and intact, everything in flight must be either fully there or absent,
// no request may get a 5xx, and a scrub afterwards must not take anything reachable.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import { runCli, startServer, type TestServer } from "../helpers/server.ts";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const WORKERS = 4;
const CYCLES = 4;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let o = 0; o < n; o += 65536) {
    crypto.getRandomValues(out.subarray(o, Math.min(n, o + 65536)));
  }
  return out;
}

/** What a tag may hold after a crash: the acknowledged value, plus any write still in flight. */
interface TagState {
  ns: string;
  tag: string;
  /** digest, or null for "deleted / never pushed" */
  possible: Set<string | null>;
}

interface ImageRecord {
  ns: string;
  digest: string;
  blobs: { digest: string; size: number }[];
}

class Ledger {
  tags = new Map<string, TagState>();
  images = new Map<string, ImageRecord>(); // manifest digest -> record (acknowledged pushes)
  fiveXX: string[] = [];
  /** unexpected answers (a worker stops at its first) */
  errors: string[] = [];
  /** writes refused with 503 RECLAMATION_IN_PROGRESS */
  reclaiming = 0;
  /** blobs of revisions deleted by digest that no other pushed image uses */
  orphaned = new Set<string>();

  state(ns: string, tag: string): TagState {
    const k = `${ns}:${tag}`;
    let s = this.tags.get(k);
    if (!s) this.tags.set(k, s = { ns, tag, possible: new Set([null]) });
    return s;
  }
}

async function call(
  ledger: Ledger,
  method: string,
  url: string,
  init: RequestInit = {},
): Promise<Response | null> {
  try {
    const r = await fetch(url, { ...init, method, redirect: "manual" });
    if (r.status >= 500) {
      const text = await r.text();
      // SPEC: a write racing a reclamation is refused with 503 + Retry-After; nothing happened.
      if (r.status === 503 && text.includes("RECLAMATION_IN_PROGRESS")) {
        ledger.reclaiming++;
        return new Response(null, { status: 503 });
      }
      ledger.fiveXX.push(`${method} ${url} -> ${r.status} ${text}`);
      return null;
    }
    return r;
  } catch {
    return null; // the server died under this request: its outcome is unknown
  }
}

async function pushBlobChunked(ledger: Ledger, base: string, ns: string, data: Uint8Array) {
  const digest = await sha256(data);
  const post = await call(ledger, "POST", `${base}/v2/${ns}/blobs/uploads/`);
  if (!post) return null;
  await post.body?.cancel();
  if (post.status === 503) return "refused";
  if (post.status !== 202) throw new Error(`POST upload: ${post.status}`);
  let loc = new URL(post.headers.get("location")!, base).href;
  const step = 64 * 1024 + 17;
  for (let o = 0; o < data.length; o += step) {
    const chunk = data.subarray(o, Math.min(data.length, o + step));
    const r = await call(ledger, "PATCH", loc, {
      body: chunk as BodyInit,
      headers: {
        "content-type": "application/octet-stream",
        "content-range": `${o}-${o + chunk.length - 1}`,
        "content-length": String(chunk.length),
      },
    });
    if (!r) return null;
    await r.body?.cancel();
    if (r.status === 503) return "refused";
    if (r.status !== 202) throw new Error(`PATCH: ${r.status}`);
    loc = new URL(r.headers.get("location")!, base).href;
  }
  const u = new URL(loc);
  u.searchParams.set("digest", digest);
  const put = await call(ledger, "PUT", u.href);
  if (!put) return null;
  await put.body?.cancel();
  if (put.status === 503) return "refused";
  if (put.status !== 201) throw new Error(`PUT upload: ${put.status}`);
  return { digest, size: data.length };
}

async function pushBlobMonolithic(ledger: Ledger, base: string, ns: string, data: Uint8Array) {
  const digest = await sha256(data);
  const r = await call(ledger, "POST", `${base}/v2/${ns}/blobs/uploads/?digest=${digest}`, {
    body: data as BodyInit,
    headers: { "content-type": "application/octet-stream" },
  });
  if (!r) return null;
  await r.body?.cancel();
  if (r.status === 503) return "refused";
  if (r.status !== 201) throw new Error(`monolithic POST: ${r.status}`);
  return { digest, size: data.length };
}

interface Mode {
  /** some layers come from a small shared pool, so pushes meet reclamations of their digest */
  sharedLayers: boolean;
  /** a moved tag's old revision is deleted by digest, leaving its blobs to the scrub */
  deleteOld: boolean;
  /** each run lasts runMs[0] + up to runMs[1] ms before the kill */
  runMs: [number, number];
}

/** One client: pushes images to its own tags, moves and deletes them, until `stop` is set. */
async function worker(
  ledger: Ledger,
  base: string,
  w: number,
  stop: { now: boolean },
  mode: Mode,
) {
  try {
    await work(ledger, base, w, stop, mode);
  } catch (e) {
    ledger.errors.push(e instanceof Error ? e.message : String(e));
  }
}

async function work(
  ledger: Ledger,
  base: string,
  w: number,
  stop: { now: boolean },
  mode: Mode,
) {
  const ns = `crash/w${w}`;
  let n = 0;
  while (!stop.now) {
    n++;
    const tag = `t${n % 5}`;
    const st = ledger.state(ns, tag);
    if (n % 7 === 0 && st.possible.size === 1 && !st.possible.has(null)) {
      st.possible.add(null); // a delete in flight
      const r = await call(ledger, "DELETE", `${base}/v2/${ns}/manifests/${tag}`);
      if (!r) return;
      await r.body?.cancel();
      if (r.status !== 202) throw new Error(`DELETE tag: ${r.status}`);
      st.possible = new Set([null]);
      continue;
    }
    const config = new TextEncoder().encode(
      JSON.stringify({ os: "linux", w, n, r: Math.random() }),
    );
    const big = n % 3 === 0;
    const layerData = mode.sharedLayers && n % 4 === 0
      ? new TextEncoder().encode(`shared layer ${n % 3}`)
      : randomBytes(big ? 300_000 + n : 2_000 + n);
    const cfg = await pushBlobMonolithic(ledger, base, ns, config);
    if (!cfg) return;
    if (cfg === "refused") continue;
    const layer = big
      ? await pushBlobChunked(ledger, base, ns, layerData)
      : await pushBlobMonolithic(ledger, base, ns, layerData);
    if (!layer) return;
    if (layer === "refused") continue;
    const body = new TextEncoder().encode(JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...cfg },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
    }));
    const digest = await sha256(body);
    st.possible.add(digest);
    const rec = { ns, digest, blobs: [cfg, layer] };
    const r = await call(ledger, "PUT", `${base}/v2/${ns}/manifests/${tag}`, {
      body: body as BodyInit,
      headers: { "content-type": OCI_MANIFEST },
    });
    if (!r) {
      ledger.images.set(digest, rec); // may or may not have landed; checked if the tag holds it
      return;
    }
    await r.body?.cancel();
    if (r.status === 503) {
      st.possible.delete(digest);
      continue;
    }
    if (r.status !== 201) throw new Error(`PUT manifest: ${r.status}`);
    assert.equal(r.headers.get("docker-content-digest"), digest);
    ledger.images.set(digest, rec);
    const old = [...st.possible].find((d) => d !== null && d !== digest);
    st.possible = new Set([digest]);
    if (mode.deleteOld && old && ![...ledger.tags.values()].some((x) => x.possible.has(old))) {
      const d = await call(ledger, "DELETE", `${base}/v2/${ns}/manifests/${old}`);
      if (!d) return;
      await d.body?.cancel();
      if (d.status !== 202 && d.status !== 404) throw new Error(`DELETE revision: ${d.status}`);
      // Its blobs stay owned by the namespace until deleted too; then scrub may reclaim them.
      for (const b of ledger.images.get(old)?.blobs ?? []) {
        const shared = [...ledger.images.values()].some((i) =>
          i.digest !== old && i.blobs.some((x) => x.digest === b.digest)
        );
        if (shared) continue;
        const bd = await call(ledger, "DELETE", `${base}/v2/${ns}/blobs/${b.digest}`);
        if (!bd) return;
        await bd.body?.cancel();
        if (bd.status !== 202 && bd.status !== 404) throw new Error(`DELETE blob: ${bd.status}`);
        ledger.orphaned.add(b.digest);
      }
    }
  }
}

async function verify(ledger: Ledger, s: TestServer, when: string) {
  for (const st of ledger.tags.values()) {
    const r = await fetch(`${s.url}/v2/${st.ns}/manifests/${st.tag}`, {
      headers: { accept: OCI_MANIFEST },
    });
    const bytes = new Uint8Array(await r.arrayBuffer());
    assert.ok(r.status === 200 || r.status === 404, `${when}: ${st.ns}:${st.tag} -> ${r.status}`);
    const got = r.status === 200 ? await sha256(bytes) : null;
    assert.ok(
      st.possible.has(got),
      `${when}: ${st.ns}:${st.tag} holds ${got}, expected one of ${[...st.possible].join(", ")}`,
    );
    if (got) assert.equal(r.headers.get("docker-content-digest"), got);
    // Whatever the tag holds now is the new acknowledged state.
    st.possible = new Set([got]);
    if (!got) continue;
    const rec = ledger.images.get(got)!;
    for (const b of rec.blobs) {
      const br = await fetch(`${s.url}/v2/${rec.ns}/blobs/${b.digest}`);
      const data = new Uint8Array(await br.arrayBuffer());
      assert.equal(br.status, 200, `${when}: blob ${b.digest} of ${st.ns}:${st.tag}`);
      assert.equal(data.length, b.size, `${when}: blob ${b.digest} size`);
      assert.equal(await sha256(data), b.digest, `${when}: blob ${b.digest} bytes`);
    }
  }
  // Every repository listed in the catalog answers its tag list (no dangling index entries).
  const cat = await fetch(`${s.url}/v2/_catalog?n=1000`);
  assert.equal(cat.status, 200);
  for (const name of (await cat.json()).repositories as string[]) {
    const tl = await fetch(`${s.url}/v2/${name}/tags/list`);
    assert.ok(tl.status === 200 || tl.status === 404, `${when}: tags/list ${name} -> ${tl.status}`);
    await tl.body?.cancel();
  }
}

/**
 * CYCLES times: start on the same data, run WORKERS clients for a random while, SIGKILL;
 * then check every acknowledged write on a final server (`finalConfig`).
 */
async function crashCycles(
  t: Deno.TestContext,
  mode: Mode,
  config: string,
  finalConfig: string,
  finalScrub: boolean,
) {
  const dataDir = await Deno.makeTempDir({ prefix: "wharf-crash-" });
  const ledger = new Ledger();
  try {
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const s = await startServer({ dataDir, config });
      if (cycle > 0) await verify(ledger, s, `after crash ${cycle}`);
      const stop = { now: false };
      const workers = Array.from(
        { length: WORKERS },
        (_, w) => worker(ledger, s.url, w, stop, mode),
      );
      await new Promise((r) => setTimeout(r, mode.runMs[0] + Math.random() * mode.runMs[1]));
      await s.kill();
      stop.now = true;
      await Promise.all(workers);
    }
    const s = await startServer({ dataDir, config: finalConfig });
    try {
      await t.step(
        "acknowledged writes survive every crash, in-flight ones are all-or-nothing",
        () => verify(ledger, s, "after the last crash"),
      );
      if (finalScrub) {
        await t.step("a scrub after the crashes keeps everything reachable", async () => {
          const out = await runCli(s, "scrub");
          assert.equal(out.code, 0, out.stderr);
          await verify(ledger, s, "after scrub");
        });
      }
      await t.step("no request got a 5xx or another unexpected answer", () => {
        assert.deepEqual(ledger.fiveXX, []);
        assert.deepEqual(ledger.errors, []);
      });
      if (mode.deleteOld) {
        await t.step("the killed servers' scrubs reclaimed deleted revisions' blobs", async () => {
          let gone = 0;
          for (const d of ledger.orphaned) {
            const [alg, hex] = d.split(":");
            const path = `${s.dataDir}/blobs/blobs/${alg}/${hex.slice(0, 2)}/${hex}`;
            if (!(await Deno.stat(path).then(() => true, () => false))) gone++;
          }
          assert.ok(gone > 0, `none of ${ledger.orphaned.size} orphaned blobs was reclaimed`);
        });
      }
      await t.step("the workload did real work", () => {
        const held = [...ledger.tags.values()].filter((x) => !x.possible.has(null)).length;
        assert.ok(ledger.images.size >= 10, `only ${ledger.images.size} images pushed`);
        assert.ok(held >= 4, `only ${held} tags hold an image`);
      });
    } finally {
      await s.stop();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}

const NO_GRACE = "[global.scrub]\ngrace_secs = 0\n";

Deno.test({
  name: "crash: SIGKILL during concurrent pushes, tag moves and deletes loses nothing acknowledged",
  ...serverTestOpts,
  fn: (t) =>
    crashCycles(
      t,
      { sharedLayers: false, deleteOld: false, runMs: [400, 900] },
      NO_GRACE,
      NO_GRACE,
      true,
    ),
});

Deno.test({
  name: "crash: SIGKILL while the server's own scrub reclaims deleted revisions' blobs",
  ...serverTestOpts,
  // A scrub every second with no grace, revisions deleted as tags move, and layers shared across
  // clients: kills land inside reclamations, and pushes meet digests being reclaimed (503). The
  // final server runs no scrub: the killed one's lease would hold a CLI scrub off for minutes.
  fn: (t) =>
    crashCycles(
      t,
      { sharedLayers: true, deleteOld: true, runMs: [1200, 1200] },
      "[global.scrub]\ninterval_secs = 1\ngrace_secs = 0\n",
      NO_GRACE,
      false,
    ),
});
