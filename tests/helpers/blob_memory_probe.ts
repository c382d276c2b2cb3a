// Streams a generated blob of `argv[0]` MiB from a FakeRegistry through UpstreamClient.getBlob
// and verifyDigest, in a process of its own (`deno test --parallel` runs test modules as
// threads of one process, whose rss the others would move), and prints
// `{"bytes":…,"growthBytes":…}`: the peak rss growth over the transfer.
//
// A GC is forced every 4 MiB: V8 lets ~30 MiB of dead chunks pile up before collecting
// them, so without it rss would measure the collector's slack, not what the stream retains.
import v8 from "node:v8";
import vm from "node:vm";
import { UpstreamClient, verifyDigest } from "../../lib/upstream/mod.ts";
import { FakeRegistry, generatedBlob } from "./fake_registry.ts";

v8.setFlagsFromString("--expose-gc");
const gc: () => void = vm.runInNewContext("gc");

const MiB = 1024 * 1024;
const size = Number(Deno.args[0] ?? 64) * MiB;
const { source, digest } = generatedBlob(size);
const reg = await FakeRegistry.start();
reg.addBlob("big", source, digest);
const client = new UpstreamClient(reg.upstreamConfig());
try {
  // the connection and code paths warmed first, so their one-time cost is not counted
  const warm = await client.getBlob("big", digest, "bytes=0-1048575");
  await new Response(warm.body).arrayBuffer();
  gc();
  const before = Deno.memoryUsage().rss;
  let peak = before;
  let bytes = 0;
  let sinceGc = 0;
  const r = await client.getBlob("big", digest);
  for await (const chunk of verifyDigest(r.body, digest, client.url)) {
    bytes += chunk.byteLength;
    sinceGc += chunk.byteLength;
    if (sinceGc >= 4 * MiB) {
      peak = Math.max(peak, Deno.memoryUsage().rss);
      gc();
      sinceGc = 0;
    }
  }
  peak = Math.max(peak, Deno.memoryUsage().rss);
  console.log(JSON.stringify({ bytes, growthBytes: peak - before }));
} finally {
  client.close();
  await reg.close();
}
