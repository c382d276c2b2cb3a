import assert from "node:assert/strict";
import { countUploadSessions } from "./upload_census.ts";

async function withKv(fn: (kv: Deno.Kv) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  const kv = await Deno.openKv(`${dir}/kv`);
  try {
    await fn(kv);
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("countUploadSessions counts upload keys up to a cap", async () => {
  await withKv(async (kv) => {
    for (let i = 0; i < 7; i++) await kv.set(["upload", "ns", `u${i}`], { offset: 0 });
    await kv.set(["uploadx"], 1);
    assert.equal(await countUploadSessions(kv), 7);
    assert.equal(await countUploadSessions(kv, 5), 5);
  });
});
