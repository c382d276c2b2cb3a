import assert from "node:assert/strict";
import { type CachedImage, evictionOrder } from "./eviction.ts";

const img = (ns: string, digest: string, fetchedAt: number, lastPulled: number | null) =>
  ({ ns, digest, size: 10, fetchedAt, lastPulled }) satisfies CachedImage;

Deno.test("eviction order: least recently pulled first, never-pulled by fetch time, held skipped", () => {
  const images = [
    img("hub/a", "sha256:a", 100, 900),
    img("hub/b", "sha256:b", 200, 300),
    img("hub/c", "sha256:c", 250, null),
    img("hub/d", "sha256:d", 50, 1000),
  ];
  assert.deepEqual(
    evictionOrder(images, new Set()).map((i) => i.digest),
    // used at: c 250 (fetched, never pulled), b 300, a 900, d 1000
    ["sha256:c", "sha256:b", "sha256:a", "sha256:d"],
  );
  assert.deepEqual(
    evictionOrder(images, new Set(["hub/b\0sha256:b"])).map((i) => i.digest),
    ["sha256:c", "sha256:a", "sha256:d"],
  );
});

Deno.test("eviction order: an image pulled or fetched within the hold is in use, not a candidate", () => {
  const images = [
    img("hub/a", "sha256:a", 100, 900), // pulled at 900: in use from 800 on
    img("hub/b", "sha256:b", 200, 300),
    img("hub/c", "sha256:c", 850, null), // fetched at 850, never pulled
    img("hub/d", "sha256:d", 820, 500), // pulled before it was fetched again (a refetch)
  ];
  assert.deepEqual(evictionOrder(images, new Set(), 800).map((i) => i.digest), ["sha256:b"]);
  assert.deepEqual(
    evictionOrder(images, new Set(), 901).map((i) => i.digest),
    ["sha256:b", "sha256:d", "sha256:c", "sha256:a"],
  );
});
