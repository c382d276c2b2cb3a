// Contention (issue 36): a CI fleet on one namespace, served by two Wharf processes on one KV
// file and one blob directory. 16 clients push images and retag 3 tags as fast as they can; 4
// clients delete tags and manifests of the same namespace. No answer may be a 5xx, and every
// delete must land: a 202 really removed what it named (checked on the other process), a 404
// means another deleter got there first (counted as landed). Reported: p50 / p99 / max latency
// of each operation, answers by status, and the commits each process retried after a conflict
// (wharf_kv_commit_retries), by operation.
//
// What the clients do, each request sent to either process in turn:
// - a retagger pushes an image the way docker does (HEAD the shared base layer, which the first
//   push uploads; POST + PUT a small layer and a config of its own; PUT the manifest under one of
//   the 3 tags), or, every third time, PUTs its first manifest again under another of the 3 tags
//   (a retag of an existing revision). Every other manifest it hands to the deleters as soon as
//   it is tagged and never pushes again, so a deleted manifest can only be gone for good;
// - a deleter, in turn: tags a handed-over manifest with a tag of its own and deletes that tag
//   (then the tag must answer 404), deletes a handed-over manifest by digest (then the digest
//   must answer 404 and no hot tag may name it; every other one is the newest handed over, which
//   may still carry a hot tag the retaggers are moving: a real conflict), and deletes one of the
//   hot tags (202 or 404; the retaggers put it back, so only its answer is judged).
//
// Run: deno run -A --unstable-kv bench/contention_bench.ts [--secs N] (default 300)
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import { MANIFEST, randomBytes, sha256, upload } from "./image_traffic.ts";

function flag(name: string, fallback: number): number {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
}

const SECS = flag("--secs", 300);
const RETAGGERS = 16;
const DELETERS = 4;
const NS = "fleet/app";
const TAGS = ["latest", "stable", "edge"];
const enc = new TextEncoder();

/** Latencies (ms) and statuses by operation. */
const ops = new Map<string, { ms: number[]; status: Record<string, number> }>();
const fiveXX: string[] = [];
const unlanded: string[] = [];

/** Sends a request, reads its answer to the end and records both. */
async function timed(
  name: string,
  f: () => Promise<Response>,
): Promise<{ status: number; headers: Headers }> {
  const t0 = performance.now();
  const r = await f();
  const body = await r.text();
  record(name, performance.now() - t0, r.status);
  if (r.status >= 500) fiveXX.push(`${name}: ${r.status} ${body.slice(0, 300)}`);
  return { status: r.status, headers: r.headers };
}

function record(name: string, ms: number, status: number) {
  let o = ops.get(name);
  if (!o) ops.set(name, o = { ms: [], status: {} });
  o.ms.push(ms);
  o.status[status] = (o.status[status] ?? 0) + 1;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** wharf_kv_commit_retries of one process: `op outcome` → count. */
async function commitRetries(url: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const text = await (await fetch(`${url}/metrics`)).text();
  for (const line of text.split("\n")) {
    const m = line.match(/^wharf_kv_commit_retries\{op="([^"]*)",outcome="([^"]*)"\} (\S+)/);
    if (m && Number(m[3]) > 0) out.set(`${m[1]} ${m[2]}`, Number(m[3]));
  }
  return out;
}

const servers: TestServer[] = [];
let turn = 0;
/** the next process, in turn: every request may land on either */
const next = () => servers[turn++ % servers.length].url;
const other = (url: string) => servers.find((s) => s.url !== url)!.url;
const base = randomBytes(64 * 1024);
const baseDigest = await sha256(base);

async function pushImage(client: number, n: number, tag: string): Promise<Uint8Array> {
  let url = next();
  const has = await timed(
    "HEAD base layer",
    () => fetch(`${url}/v2/${NS}/blobs/${baseDigest}`, { method: "HEAD" }),
  );
  if (has.status === 404) {
    const t0 = performance.now();
    await upload(url, NS, base);
    record("push blob (POST + PUT)", performance.now() - t0, 201);
  }
  url = next();
  const layer = enc.encode(`layer ${client}/${n} ${crypto.randomUUID()} ${"x".repeat(8192)}`);
  let t0 = performance.now();
  const layerDigest = await upload(url, NS, layer);
  record("push blob (POST + PUT)", performance.now() - t0, 201);
  const cfg = enc.encode(JSON.stringify({ os: "linux", architecture: "amd64", client, n }));
  t0 = performance.now();
  const cfgDigest = await upload(next(), NS, cfg);
  record("push blob (POST + PUT)", performance.now() - t0, 201);
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: cfgDigest,
      size: cfg.length,
    },
    layers: [
      {
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: baseDigest,
        size: base.length,
      },
      {
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: layerDigest,
        size: layer.length,
      },
    ],
  }));
  await putManifest("push manifest (new, tagged)", next(), tag, body);
  return body;
}

function putManifest(name: string, url: string, ref: string, body: Uint8Array) {
  return timed(name, () =>
    fetch(`${url}/v2/${NS}/manifests/${ref}`, {
      method: "PUT",
      body: body as BodyInit,
      headers: { "content-type": MANIFEST },
    }));
}

try {
  const a = await startServer({ unchecked: true });
  servers.push(a);
  // The second process: the same KV file and the same blob directory.
  const b = await startServer({ unchecked: true, dataDir: a.dataDir });
  servers.push(b);
  /** manifests the retaggers are done with: never pushed again, the deleters' to remove */
  const handed: { digest: string; body: Uint8Array }[] = [];
  const until = performance.now() + SECS * 1000;
  let retags = 0;

  const retaggers = Array.from({ length: RETAGGERS }, async (_, c) => {
    // The manifest its retags of an existing revision name: never handed over, never deleted.
    let kept: Uint8Array | null = null;
    for (let n = 0; performance.now() < until; n++) {
      const tag = TAGS[(c + n) % TAGS.length];
      try {
        if (kept && n % 3 === 2) {
          await putManifest("retag (existing manifest)", next(), tag, kept);
        } else {
          const body = await pushImage(c, n, tag);
          // Handed over tagged: the deleters may find it still carrying `tag`.
          if (kept) handed.push({ digest: await sha256(body), body });
          else kept = body;
        }
        retags++;
      } catch (e) {
        // upload() throws on a refused blob push, naming its answer.
        fiveXX.push(`blob push: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  });

  // Every other time the newest: just tagged, it may still carry a hot tag that the retaggers
  // are about to move (a real conflict); else any, mostly untagged by then.
  let takes = 0;
  const take = () => {
    if (handed.length === 0) return null;
    const i = takes++ % 2 ? handed.length - 1 : Math.floor(Math.random() * handed.length);
    return handed.splice(i, 1)[0];
  };
  const deleters = Array.from({ length: DELETERS }, async (_, d) => {
    for (let n = 0; performance.now() < until; n++) {
      const m = take();
      if (!m) {
        await new Promise((r) => setTimeout(r, 20));
        continue;
      }
      const url = next();
      switch (n % 3) {
        case 0: {
          // a tag of its own on a handed-over manifest, then its delete
          const own = `del-${d}-${n}`;
          await putManifest("tag (deleter's own)", url, own, m.body);
          const r = await timed(
            "delete tag (own)",
            () => fetch(`${next()}/v2/${NS}/manifests/${own}`, { method: "DELETE" }),
          );
          const after = await fetch(`${other(url)}/v2/${NS}/manifests/${own}`, { method: "HEAD" });
          await after.body?.cancel();
          if (r.status !== 202 || after.status !== 404) {
            unlanded.push(`delete tag ${own}: ${r.status}, then HEAD ${after.status}`);
          }
          handed.push(m); // its manifest stays for a delete by digest
          break;
        }
        case 1: {
          const r = await timed(
            "delete manifest (by digest)",
            () => fetch(`${url}/v2/${NS}/manifests/${m.digest}`, { method: "DELETE" }),
          );
          const after = await fetch(`${other(url)}/v2/${NS}/manifests/${m.digest}`, {
            method: "HEAD",
          });
          await after.body?.cancel();
          if ((r.status !== 202 && r.status !== 404) || after.status !== 404) {
            unlanded.push(`delete ${m.digest}: ${r.status}, then HEAD ${after.status}`);
          }
          for (const tag of TAGS) {
            const h = await fetch(`${other(url)}/v2/${NS}/manifests/${tag}`, { method: "HEAD" });
            await h.body?.cancel();
            if (h.headers.get("docker-content-digest") === m.digest) {
              unlanded.push(`deleted ${m.digest} is still tagged ${tag}`);
            }
          }
          break;
        }
        default: {
          handed.push(m);
          const tag = TAGS[n % TAGS.length];
          const r = await timed(
            "delete tag (hot)",
            () => fetch(`${url}/v2/${NS}/manifests/${tag}`, { method: "DELETE" }),
          );
          if (r.status !== 202 && r.status !== 404) unlanded.push(`delete tag ${tag}: ${r.status}`);
        }
      }
    }
  });

  const load = Deno.loadavg()[0];
  const t0 = performance.now();
  await Promise.all([...retaggers, ...deleters]);
  const secs = (performance.now() - t0) / 1000;

  const retries = new Map<string, number>();
  for (const s of servers) {
    for (const [k, v] of await commitRetries(s.url)) retries.set(k, (retries.get(k) ?? 0) + v);
  }

  const rows = [...ops.entries()].map(([name, o]) => {
    const sorted = o.ms.sort((x, y) => x - y);
    return {
      operation: name,
      count: sorted.length,
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      max: sorted[sorted.length - 1],
      status: o.status,
    };
  });
  const fmt = (ms: number) => ms.toFixed(1);
  console.log(
    `\n${SECS} s (${secs.toFixed(1)} s measured), 2 processes on one KV, ${RETAGGERS} retaggers ` +
      `of ${TAGS.length} tags, ${DELETERS} deleters; load average ${
        load.toFixed(1)
      } at the start, ` +
      `${Deno.loadavg()[0].toFixed(1)} at the end; ${retags} pushes and retags\n`,
  );
  console.log("| operation | count | p50 ms | p99 ms | max ms | answers |");
  console.log("| --- | ---: | ---: | ---: | ---: | --- |");
  for (const r of rows) {
    const answers = Object.entries(r.status).map(([s, n]) => `${n} × ${s}`).join(", ");
    console.log(
      `| ${r.operation} | ${r.count} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${
        fmt(r.max)
      } | ${answers} |`,
    );
  }
  console.log("\ncommits retried after a conflict (both processes), by operation:");
  for (const [k, v] of [...retries.entries()].sort()) console.log(`  ${k}: ${v}`);
  console.log(`\n5xx answers: ${fiveXX.length}; deletes that did not land: ${unlanded.length}`);
  for (const f of [...fiveXX, ...unlanded].slice(0, 20)) console.log(`  ${f}`);
  await Deno.mkdir(new URL("./out/", import.meta.url), { recursive: true });
  await Deno.writeTextFile(
    new URL("./out/contention.json", import.meta.url),
    JSON.stringify({ secs, load, rows, retries: Object.fromEntries(retries), fiveXX, unlanded }),
  );
  if (fiveXX.length > 0 || unlanded.length > 0) Deno.exitCode = 1;
} finally {
  for (const s of [...servers].reverse()) await s.stop().catch(() => {});
  if (servers.length > 0) {
    await Deno.remove(servers[0].dataDir, { recursive: true }).catch(() => {});
  }
}
