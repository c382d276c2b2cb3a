import assert from "node:assert/strict";
import { join } from "node:path";
import { defaultConfig } from "../config/mod.ts";
import { openServices } from "./open.ts";

async function tempConfig() {
  const dir = await Deno.makeTempDir({ prefix: "wharf-services-" });
  const cfg = defaultConfig();
  cfg.blobStore = { fs: { rootDir: join(dir, "blobs") }, s3: null };
  cfg.metadataStore = { path: join(dir, "m.kv"), url: null };
  return { cfg, dir };
}

Deno.test("openServices(command): nothing runs in the background; one KV shared; close closes it", async () => {
  const { cfg, dir } = await tempConfig();
  try {
    const s = await openServices(cfg, { role: "command" });
    assert.equal(s.runner, null);
    assert.equal(s.outbox, null);
    assert.equal(s.registry, s.registry); // built once
    assert.equal(s.registry.jobs, s.jobs);
    await s.kv.set(["ns", "probe"], 1);
    await s.close();
    await assert.rejects(s.kv.get(["ns", "probe"]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("openServices(worker): drains only the queues asked for; the outbox only with events", async () => {
  const { cfg, dir } = await tempConfig();
  try {
    const scan = await openServices(cfg, { role: "worker", queues: ["scan"] });
    assert.deepEqual(scan.runner?.queues, ["scan"]);
    assert.equal(scan.outbox, null);
    await scan.close();
    const all = await openServices(cfg, { role: "worker" });
    assert.ok(all.runner?.queues.includes("events"));
    assert.notEqual(all.outbox, null);
    await all.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
