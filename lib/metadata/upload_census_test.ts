import assert from "node:assert/strict";
import { openTestKv } from "../../tests/helpers/kv.ts";
import { countUploadSessions } from "./upload_census.ts";

Deno.test("countUploadSessions counts upload keys up to a cap", async () => {
  const t = await openTestKv();
  try {
    for (let i = 0; i < 7; i++) await t.kv.set(["upload", "ns", `u${i}`], { offset: 0 });
    await t.kv.set(["uploadx"], 1);
    assert.equal(await countUploadSessions(t.kv), 7);
    assert.equal(await countUploadSessions(t.kv, 5), 5);
  } finally {
    await t.close();
  }
});
