// Random concurrent operations on a deliberately small space (3 namespaces, 6 blobs, 3 tags):
// blob pushes, mounts, blob deletes, manifest pushes, tag deletes, manifest deletes, reads, with
// and without allow_missing_manifest_references. Every answer must be a non-5xx, and afterwards
// every listed tag must resolve to a manifest whose blobs (in strict mode) read back intact.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import { OCI_CONFIG, OCI_LAYER, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

const CLIENTS = 16;
const RUN_MS = 5_000;
const NS = ["chaos/a", "chaos/b", "chaos/c"];
const TAGS = ["t1", "t2", "t3"];
const enc = new TextEncoder();
const pick = <T>(a: T[]): T => a[Math.floor(Math.random() * a.length)];

async function run(s: TestServer, strict: boolean) {
  const blobs = await Promise.all(Array.from({ length: 6 }, async (_, i) => {
    const b = enc.encode(`chaos blob ${i} ${"x".repeat(i * 700)}`);
    return { b, d: await sha256(b) };
  }));
  const cfg = enc.encode(JSON.stringify({ os: "linux", strict }));
  const cfgD = await sha256(cfg);
  const counts: Record<string, number> = {};
  const fiveXX: string[] = [];

  async function op(): Promise<void> {
    const ns = pick(NS);
    const bl = pick(blobs);
    let name: string;
    let r: Response;
    switch (Math.floor(Math.random() * 9)) {
      case 0:
        name = "push";
        r = await fetch(`${s.url}/v2/${ns}/blobs/uploads/?digest=${bl.d}`, {
          method: "POST",
          body: bl.b as BodyInit,
        });
        break;
      case 1:
        name = "mount";
        r = await fetch(`${s.url}/v2/${ns}/blobs/uploads/?mount=${bl.d}&from=${pick(NS)}`, {
          method: "POST",
        });
        break;
      case 2:
        name = "delete-blob";
        r = await fetch(`${s.url}/v2/${ns}/blobs/${bl.d}`, { method: "DELETE" });
        break;
      case 3:
      case 4: {
        name = "put-manifest";
        const c = await fetch(`${s.url}/v2/${ns}/blobs/uploads/?digest=${cfgD}`, {
          method: "POST",
          body: cfg as BodyInit,
        });
        await c.body?.cancel();
        const m = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: OCI_MANIFEST,
          config: { mediaType: OCI_CONFIG, digest: cfgD, size: cfg.length },
          layers: [{ mediaType: OCI_LAYER, digest: bl.d, size: bl.b.length }],
        }));
        r = await fetch(`${s.url}/v2/${ns}/manifests/${pick(TAGS)}`, {
          method: "PUT",
          body: m as BodyInit,
          headers: { "content-type": OCI_MANIFEST },
        });
        break;
      }
      case 5:
        name = "delete-tag";
        r = await fetch(`${s.url}/v2/${ns}/manifests/${pick(TAGS)}`, { method: "DELETE" });
        break;
      case 6: {
        name = "delete-manifest";
        const h = await fetch(`${s.url}/v2/${ns}/manifests/${pick(TAGS)}`, {
          method: "HEAD",
          headers: { accept: OCI_MANIFEST },
        });
        const d = h.headers.get("docker-content-digest");
        r = d ? await fetch(`${s.url}/v2/${ns}/manifests/${d}`, { method: "DELETE" }) : h;
        break;
      }
      case 7:
        name = "get-blob";
        r = await fetch(`${s.url}/v2/${ns}/blobs/${bl.d}`);
        break;
      default:
        name = "tags";
        r = await fetch(`${s.url}/v2/${ns}/tags/list`);
    }
    const text = await r.text();
    counts[`${name} ${r.status}`] = (counts[`${name} ${r.status}`] ?? 0) + 1;
    if (r.status >= 500) fiveXX.push(`${name} ${r.status} ${text.slice(0, 300)}`);
  }

  const end = Date.now() + RUN_MS;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (Date.now() < end) await op();
  }));
  assert.deepEqual(fiveXX, []);
  for (const k of ["push 201", "put-manifest 201", "delete-blob 202", "delete-blob 405"]) {
    assert.ok((counts[k] ?? 0) > 0, `no "${k}" in ${JSON.stringify(counts)}`);
  }

  for (const ns of NS) {
    const tl = await fetch(`${s.url}/v2/${ns}/tags/list`);
    if (tl.status === 404) {
      await tl.body?.cancel();
      continue;
    }
    assert.equal(tl.status, 200);
    for (const tag of (await tl.json()).tags as string[]) {
      const m = await fetch(`${s.url}/v2/${ns}/manifests/${tag}`, {
        headers: { accept: OCI_MANIFEST },
      });
      assert.equal(m.status, 200, `${ns}:${tag} is listed but does not resolve`);
      const man = await m.json();
      if (!strict) continue; // rule 4: references the namespace does not own are allowed
      for (const b of [man.config, ...man.layers]) {
        const g = await fetch(`${s.url}/v2/${ns}/blobs/${b.digest}`);
        const bytes = new Uint8Array(await g.arrayBuffer());
        assert.equal(g.status, 200, `${ns}:${tag} references ${b.digest}, which ${ns} cannot read`);
        assert.equal(await sha256(bytes), b.digest);
      }
    }
  }
}

Deno.test({
  name: "chaos: concurrent random operations on a small space (default references mode)",
  ...serverTestOpts,
  fn: () => withServer({}, (s) => run(s, false)),
});

Deno.test({
  name: "chaos: concurrent random operations with allow_missing_manifest_references = false",
  ...serverTestOpts,
  fn: () =>
    withServer(
      { config: "[global]\nallow_missing_manifest_references = false\n" },
      (s) => run(s, true),
    ),
});
