// The blobs a test server's store holds, whatever the backend its config names (fs or S3), so
// tests that check what scrub left behind run unchanged on either.
import { loadConfigFiles } from "../../lib/config/mod.ts";
import { openBlobStore } from "../../lib/storage/mod.ts";
import type { TestServer } from "./server.ts";

export async function* storedBlobs(s: TestServer): AsyncGenerator<string> {
  const store = await openBlobStore(await loadConfigFiles([s.configPath]));
  for await (const b of store.listBlobs()) yield b.name;
}
