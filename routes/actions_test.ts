import assert from "node:assert/strict";
import { parseAction } from "./actions.ts";
import { RegistryError } from "../lib/oci/mod.ts";

const D = `sha256:${"a".repeat(64)}`;
const U = "0b0d8b4e-3f3c-4bfa-9d6f-8c9a8a3e2f10";

Deno.test("every OCI route maps to its action, names may contain route words", () => {
  const table: [string, string, Record<string, string> | null][] = [
    ["GET", "/v2/", { name: "get-api-version" }],
    ["HEAD", "/v2", { name: "get-api-version" }],
    ["GET", "/v2/_catalog", { name: "list-catalog" }],
    ["GET", `/v2/a/blobs/${D}`, { name: "get-blob", namespace: "a", digest: D }],
    ["HEAD", `/v2/a/blobs/blobs/${D}`, { name: "get-blob", namespace: "a/blobs", digest: D }],
    // percent-encoded as some clients send it; docker-registry decodes the path the same way
    ["GET", `/v2/a/blobs/${D.replace(":", "%3A")}`, {
      name: "get-blob",
      namespace: "a",
      digest: D,
    }],
    ["GET", `/v2/a/blobs/${D.replace(":", "%3a")}`, {
      name: "get-blob",
      namespace: "a",
      digest: D,
    }],
    ["DELETE", `/v2/a/b/blobs/${D}`, { name: "delete-blob", namespace: "a/b", digest: D }],
    ["POST", "/v2/a/blobs/uploads/", { name: "start-upload", namespace: "a" }],
    ["POST", "/v2/manifests/blobs/uploads/", { name: "start-upload", namespace: "manifests" }],
    ["GET", `/v2/a/blobs/uploads/${U}`, { name: "get-upload", namespace: "a", uuid: U }],
    ["PATCH", `/v2/a/blobs/uploads/${U}`, { name: "update-upload", namespace: "a", uuid: U }],
    ["PUT", `/v2/a/blobs/uploads/${U}`, { name: "complete-upload", namespace: "a", uuid: U }],
    ["DELETE", `/v2/a/blobs/uploads/${U}`, { name: "cancel-upload", namespace: "a", uuid: U }],
    ["GET", "/v2/a/manifests/latest", {
      name: "get-manifest",
      namespace: "a",
      reference: "latest",
      tag: "latest",
    }],
    ["PUT", `/v2/tags/manifests/manifests/${D}`, {
      name: "put-manifest",
      namespace: "tags/manifests",
      reference: D,
      digest: D,
    }],
    ["DELETE", "/v2/a/manifests/v1", {
      name: "delete-manifest",
      namespace: "a",
      reference: "v1",
      tag: "v1",
    }],
    ["GET", "/v2/a/tags/list", { name: "list-tags", namespace: "a" }],
    ["GET", "/v2/tags/list/tags/list", { name: "list-tags", namespace: "tags/list" }],
    ["GET", `/v2/a/referrers/${D}`, { name: "get-referrers", namespace: "a", digest: D }],
    ["GET", "/healthz", { name: "healthz" }],
    ["GET", "/readyz", { name: "readyz" }],
    ["GET", "/metrics", { name: "metrics" }],
    ["HEAD", "/metrics", { name: "metrics" }],
    ["GET", "/token", { name: "get-token" }],
    ["GET", "/v2/a/unknown/thing", null],
    ["GET", "/nothing", null],
  ];
  for (const [method, path, want] of table) {
    assert.deepEqual(parseAction(method, path), want, `${method} ${path}`);
  }
});

Deno.test("malformed route parts raise the SPEC error", () => {
  const code = (m: string, p: string) => {
    try {
      parseAction(m, p);
      return "none";
    } catch (e) {
      return `${(e as RegistryError).status} ${(e as RegistryError).code}`;
    }
  };
  assert.equal(code("GET", `/v2/A/blobs/${D}`), "400 NAME_INVALID");
  assert.equal(code("GET", "/v2/a/blobs/sha256:abc"), "400 DIGEST_INVALID");
  assert.equal(code("GET", "/v2/a/manifests/sha256:abc"), "400 DIGEST_INVALID");
  assert.equal(code("PATCH", "/v2/a/blobs/uploads/not-a-uuid"), "404 BLOB_UPLOAD_UNKNOWN");
  assert.equal(code("POST", "/v2/a/manifests/x"), "400 UNSUPPORTED");
  assert.equal(
    code("POST", "/token"),
    "405 UNSUPPORTED",
    "SPEC: POST /token is 405 with Allow: GET",
  );
  assert.equal(code("GET", "/v2/a/referrers/garbage"), "none"); // answered by the handler
});

Deno.test("extension listings map to their actions; names may contain _svc and route words", () => {
  const table: [string, string, Record<string, string> | null][] = [
    ["GET", "/v2/_svc/repositories/list", { name: "list-repositories" }],
    ["HEAD", "/v2/_svc/repositories/list", { name: "list-repositories" }],
    ["GET", "/v2/_svc/namespaces/list", { name: "list-namespaces" }],
    ["GET", "/v2/_svc/ui/config", { name: "ui-config" }],
    ["GET", "/v2/a/_svc/revisions/list", { name: "list-revisions", namespace: "a" }],
    ["GET", "/v2/a/b/_svc/pulls/list", {
      name: "list-revisions",
      namespace: "a/b",
      resource: "pulls",
    }],
    ["GET", "/v2/a/_svc/uploads/list", { name: "list-uploads", namespace: "a" }],
    ["GET", `/v2/a/b/_svc/signatures/${D}`, {
      name: "get-signatures",
      namespace: "a/b",
      reference: D,
      digest: D,
    }],
    ["HEAD", "/v2/a/_svc/signatures/v1", {
      name: "get-signatures",
      namespace: "a",
      reference: "v1",
      tag: "v1",
    }],
    ["GET", "/v2/my_svc/_svc/revisions/list", { name: "list-revisions", namespace: "my_svc" }],
    ["GET", "/v2/blobs/manifests/_svc/uploads/list", {
      name: "list-uploads",
      namespace: "blobs/manifests",
    }],
    ["GET", "/v2/x_svc/tags/_svc/revisions/list", {
      name: "list-revisions",
      namespace: "x_svc/tags",
    }],
    ["GET", `/v2/a_svc/blobs/${D}`, { name: "get-blob", namespace: "a_svc", digest: D }],
    ["GET", "/v2/svc/manifests/list", {
      name: "get-manifest",
      namespace: "svc",
      reference: "list",
      tag: "list",
    }],
    ["GET", "/v2/a_svc/revisions/list/tags/list", {
      name: "list-tags",
      namespace: "a_svc/revisions/list",
    }],
    ["GET", "/v2/_svc/revisions/list", null],
    ["GET", "/v2/_svc/unknown/list", null],
    ["GET", "/v2/_svc/jobs", null],
    ["GET", "/v2/_svc/jobs/list", { name: "list-jobs", resource: "pending" }],
    ["HEAD", "/v2/_svc/jobs/list", { name: "list-jobs", resource: "pending" }],
    ["GET", "/v2/_svc/jobs/failed", { name: "list-failed-jobs", resource: "failed" }],
    ["POST", "/v2/_svc/jobs/failed", { name: "retry-job", resource: "failed" }],
    ["DELETE", "/v2/_svc/jobs/failed", { name: "delete-job", resource: "failed" }],
    ["DELETE", "/v2/_svc/jobs/pending", { name: "delete-job", resource: "pending" }],
    ["GET", "/v2/_svc/jobs/list/x", null],
    ["GET", "/v2/_svc/replication/status", { name: "replication-status" }],
    ["HEAD", "/v2/_svc/replication/status", { name: "replication-status" }],
    ["GET", "/v2/_svc/replication", null],
    ["GET", "/v2/a/_svc/jobs/list", null],
    ["GET", "/_ext/repositories/list", null],
    ["GET", "/_ext/ui/config", null],
  ];
  for (const [method, path, want] of table) {
    assert.deepEqual(parseAction(method, path), want, `${method} ${path}`);
  }
});

Deno.test("extension listings answer other methods 400 UNSUPPORTED, bad names 400", () => {
  for (
    const path of [
      "/v2/_svc/repositories/list",
      "/v2/_svc/namespaces/list",
      "/v2/_svc/ui/config",
      "/v2/_svc/replication/status",
      "/v2/a/_svc/revisions/list",
      "/v2/a/_svc/pulls/list",
      "/v2/a/_svc/uploads/list",
    ]
  ) {
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      assert.throws(
        () => parseAction(method, path),
        (e) => e instanceof RegistryError && e.status === 400 && e.code === "UNSUPPORTED",
        `${method} ${path}`,
      );
    }
  }
  assert.throws(
    () => parseAction("GET", "/v2/A/_svc/revisions/list"),
    (e) => e instanceof RegistryError && e.code === "NAME_INVALID",
  );
});
