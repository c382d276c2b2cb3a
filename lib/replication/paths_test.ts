import assert from "node:assert/strict";
import { downstreamName } from "./paths.ts";

Deno.test("downstream names: a bare host keeps the namespace, a path replaces the repository", () => {
  const table: [string, string, string, string][] = [
    ["app", "app/web", "https://b.example.com", "app/web"],
    ["app", "app/web", "https://b.example.com/", "app/web"],
    ["app", "app/web", "https://b.example.com/mirror/app2", "mirror/app2/web"],
    ["app", "app", "https://b.example.com/m", "m"],
    ["team/app", "team/app/x/y", "http://127.0.0.1:5000/dr", "dr/x/y"],
  ];
  for (const [repo, ns, url, want] of table) {
    assert.equal(downstreamName(repo, ns, url), want, `${repo} ${ns} ${url}`);
  }
});
