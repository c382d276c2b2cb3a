// A gzip layer that passes `max_entries` keeps a partial listing with every inflater. With the
// web and node inflaters the checkpoint feed used to reject its result when the walk cancelled
// the stream, so the run threw "cancelled" instead of recording what it had listed.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { join } from "node:path";
import { indexLayer } from "./indexer.ts";
import { IndexRecords } from "./index_records.ts";
import { LayerReader } from "./layer_store.ts";
import { nativeZlibAvailable } from "./native_checkpoints.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { buildConfig } from "../config/mod.ts";
import { tarOf } from "../../tests/helpers/tar.ts";

Deno.test("a gzip layer over max_entries is listed partially by every inflater", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-partial-gz-" });
  const kv = await Deno.openKv(join(dir, "kv"));
  try {
    const store = new FsBlobStore(join(dir, "store"));
    await store.init();
    // ~6 MiB of tar, so the walk stops long before the feed has read the whole layer.
    const items = Array.from({ length: 3000 }, (_, i) => ({
      path: `d/f${i}.txt`,
      data: `${i}`.repeat(700),
    }));
    const gz = new Uint8Array(zlib.gzipSync(tarOf(items), { level: 6 }));
    const digest = `sha256:${"5a".repeat(32)}`;
    await store.put(digest, gz);
    const cfg = buildConfig({ global: { index: { max_entries: 10 } } }, []);
    const inflaters = nativeZlibAvailable()
      ? ["native", "web", "node"] as const
      : ["web", "node"] as const;
    for (const inflater of inflaters) {
      const { record } = await indexLayer({
        cfg,
        records: new IndexRecords(kv),
        store,
        digest,
        size: gz.length,
        inflater,
      });
      assert.equal(record.state, "partial", `${inflater}: ${record.error}`);
      const listed = [];
      for await (const e of new LayerReader(store).entries(record)) listed.push(e.path);
      assert.equal(listed.length, 10, inflater);
      assert.equal(listed[0], "d/f0.txt");
    }
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});
