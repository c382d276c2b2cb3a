import assert from "node:assert/strict";
import { apiUrl, pullScope, upstreamName } from "./paths.ts";

Deno.test("upstreamName: a bare host drops the repository, a URL path replaces it", () => {
  const cases: [string, string, string, string | null][] = [
    ["hub", "hub/x/y", "https://registry.example", "x/y"],
    ["hub", "hub/x", "https://registry.example/", "x"],
    ["hub", "hub/x/y", "http://127.0.0.1:5000", "x/y"],
    ["mirror", "mirror/x", "https://mirror.example/org/team", "org/team/x"],
    ["mirror", "mirror/x/y", "https://mirror.example/org/team/", "org/team/x/y"],
    ["a/b", "a/b/c", "https://mirror.example/org", "org/c"],
    // the repository itself, or a namespace outside it, has no upstream name
    ["hub", "hub", "https://registry.example", null],
    ["hub", "hub/", "https://registry.example", null],
    ["hub", "hubx/y", "https://registry.example", null],
    ["hub", "other/y", "https://registry.example", null],
    // Docker Hub's official images live under library/
    ["hub", "hub/alpine", "https://registry-1.docker.io", "library/alpine"],
    ["hub", "hub/x/y", "https://registry-1.docker.io", "x/y"],
    ["hub", "hub/library/alpine", "https://registry-1.docker.io", "library/alpine"],
    ["hub", "hub/alpine", "https://index.docker.io", "library/alpine"],
  ];
  for (const [repo, ns, url, want] of cases) {
    assert.equal(upstreamName(repo, ns, url), want, `${repo} ${ns} ${url}`);
  }
});

Deno.test("apiUrl: /v2/<name>/... on the upstream's origin; pullScope", () => {
  assert.equal(
    apiUrl("https://mirror.example/org/team", "org/team/x", "manifests", "latest").href,
    "https://mirror.example/v2/org/team/x/manifests/latest",
  );
  assert.equal(
    apiUrl("http://127.0.0.1:5000", "x/y", "blobs", "sha256:ab").href,
    "http://127.0.0.1:5000/v2/x/y/blobs/sha256:ab",
  );
  assert.equal(pullScope("library/alpine"), "repository:library/alpine:pull");
});
