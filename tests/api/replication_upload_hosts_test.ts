// Issue 35 item 3 (docs/replication.md, "Uploads on another host"; docs/operations.md, "What
// outbound clients follow"): a downstream that answers the upload POST with a Location on another
// host does not get Wharf's PATCH/PUT of the blob sent there unless that host's origin is in the
// downstream's `upload_hosts`. Refused, the job is dead-lettered at once with an error naming the
// refused origin, nothing reaches that host, and no body of it is echoed. Listed (an ECR-style
// split data plane), the blob goes there without the downstream's credentials, and an error body
// of that host is still never echoed into the status.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";
import { until } from "../helpers/until.ts";

const SECRET = "UPLOAD-HOST-SAYS-<script>alert(1)</script>";

interface Seen {
  method: string;
  path: string;
  query: string;
  authorization: string | null;
  bytes: number;
}

/**
 * Another loopback port: an upload sink (PATCH 202 with its own Location, PUT 201), or with
 * `failPuts` PUTs answered 500 with a body that must never be echoed.
 */
function uploadHost(opts: { failPuts?: number } = {}) {
  const seen: Seen[] = [];
  let failPuts = opts.failPuts ?? 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (r) => {
    const u = new URL(r.url);
    const bytes = r.body ? (await r.arrayBuffer()).byteLength : 0;
    seen.push({
      method: r.method,
      path: u.pathname,
      query: u.search,
      authorization: r.headers.get("authorization"),
      bytes,
    });
    if (r.method === "PATCH") {
      return new Response(null, { status: 202, headers: { location: u.pathname } });
    }
    if (r.method === "PUT" && failPuts > 0) {
      failPuts--;
      return new Response(`{"errors":[{"code":"DENIED","message":"${SECRET}"}]}`, {
        status: 500,
        statusText: SECRET,
        headers: { "content-type": "application/json" },
      });
    }
    if (r.method === "PUT") return new Response(null, { status: 201 });
    return new Response(SECRET, { status: 500 });
  });
  const port = (server.addr as Deno.NetAddr).port;
  return { url: `http://127.0.0.1:${port}`, seen, stop: () => server.shutdown() };
}

/** The downstream: its upload POSTs answer 202 with a Location on `to`; manifest PUTs 201. */
async function splitDownstream(to: string): Promise<FakeRegistry> {
  const down = await FakeRegistry.start({
    auth: { scheme: "basic", username: "replicator", password: "down-secret" },
  });
  // The fault answers before any auth check, as a front end handing out upload URLs might.
  down.fault({ method: "POST", path: "/blobs/uploads/" }, {
    status: 202,
    headers: { location: `${to}/upload/session-1` },
  });
  down.fault({ method: "PUT", path: /\/manifests\// }, { status: 201 });
  return down;
}

function config(down: FakeRegistry, uploadHosts: string[]): string {
  return `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 50
backoff_max_ms = 200
max_attempts = 3

[[repository."app".downstream]]
name = "split"
url = "${down.url}"
username = "replicator"
password = "down-secret"
connect_timeout_secs = 2
read_timeout_secs = 3
${uploadHosts.length ? `upload_hosts = ${JSON.stringify(uploadHosts)}` : ""}
`;
}

/** Pushes a two-blob image to app/x:v1; returns the blobs' sizes. */
async function pushImage(s: TestServer, tag: string): Promise<number[]> {
  const cfg = jsonBytes({ os: "linux", tag });
  const layer = unique(`split data plane ${tag} `.repeat(300));
  await pushBlob(s.url, "app/x", cfg);
  await pushBlob(s.url, "app/x", layer);
  const body = imageManifest(await descOf(OCI_CONFIG, cfg), [await descOf(OCI_LAYER, layer)]);
  const put = await req(s, `/v2/app/x/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": OCI_MANIFEST },
  });
  assert.equal(put.status, 201);
  await put.body?.cancel();
  return [cfg.length, layer.length];
}

interface StatusRow {
  name: string;
  last_error: { message: string } | null;
  last_success_at: string | null;
  failed: number;
  pending: number;
}

async function statusOf(s: TestServer): Promise<StatusRow> {
  const r = await req(s, "/v2/_svc/replication/status");
  assert.equal(r.status, 200);
  const rows: StatusRow[] = (await r.json()).downstreams;
  return rows.find((d) => d.name === "split")!;
}

Deno.test({
  ...serverTestOpts,
  name: "replication: an upload Location on a host not in upload_hosts is refused, nothing sent",
  fn: async () => {
    const other = uploadHost();
    const down = await splitDownstream(other.url);
    try {
      await withServer({ config: config(down, []) }, async (s) => {
        await pushImage(s, "v1");
        let failed: { last_error: string; attempts: number }[] = [];
        await until("the dead letter", async () => {
          const r = await req(s, "/v2/_svc/jobs/failed?queue=replication");
          failed = (await r.json()).failed;
          return failed.length > 0;
        });
        const err = failed[0].last_error;
        assert.match(err, new RegExp(`upload Location on ${other.url} refused`), err);
        assert.match(err, /upload_hosts/);
        // refused for good: dead-lettered at the first attempt, not retried against the host
        assert.equal(failed[0].attempts, 1, err);
        assert.ok(!err.includes("UPLOAD-HOST-SAYS"), err);
        // the downstream was asked, the other host never
        assert.ok(down.count("POST", "/blobs/uploads/") > 0);
        assert.deepEqual(other.seen, [], "nothing was sent to the other host");
        const st = await statusOf(s);
        assert.match(st.last_error?.message ?? "", /upload Location on .* refused/);
        assert.ok(!(st.last_error?.message ?? "").includes("UPLOAD-HOST-SAYS"));
        assert.equal(down.count("PUT", /\/manifests\//), 0, "no manifest without its blobs");
        assert.ok(!s.output().includes("UPLOAD-HOST-SAYS"), "nor in the logs");
      });
    } finally {
      await down.close();
      await other.stop();
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "replication: upload_hosts lists a split data plane; its error bodies are not echoed",
  fn: async () => {
    // The first PUT completing an upload fails with a body naming the secret; the retry passes.
    const other = uploadHost({ failPuts: 1 });
    const down = await splitDownstream(other.url);
    try {
      await withServer({ config: config(down, [other.url]) }, async (s) => {
        const sizes = await pushImage(s, "v1");
        await until(
          "the manifest downstream",
          () => Promise.resolve(down.count("PUT", /\/manifests\/v1$/) > 0),
        );
        // every blob went to the upload host, in PATCHes then a PUT with its digest (twice:
        // the retry after the failed PUT sends them again, as the downstream still lacks them)
        const patched = new Set(other.seen.filter((r) => r.method === "PATCH").map((r) => r.bytes));
        assert.deepEqual([...patched].sort((a, b) => a - b), [...sizes].sort((a, b) => a - b));
        assert.ok(other.seen.some((r) => r.method === "PUT" && r.query.includes("digest=")));
        // the downstream's credentials stay on the downstream's origin
        for (const r of other.seen) assert.equal(r.authorization, null, `${r.method} ${r.path}`);
        assert.ok(down.requests.some((r) => r.authorization?.startsWith("Basic ")));
        // the failed PUT left an error naming its status and host, not its body or reason
        const st = await statusOf(s);
        assert.ok(st.last_error, "the failed attempt was recorded");
        assert.match(st.last_error.message, /500/);
        assert.match(st.last_error.message, new RegExp(`from ${other.url}`));
        assert.ok(!st.last_error.message.includes("UPLOAD-HOST-SAYS"), st.last_error.message);
        assert.ok(!s.output().includes("UPLOAD-HOST-SAYS"), "nor in the logs");
        assert.ok(st.last_success_at, "then the job went through");
      });
    } finally {
      await down.close();
      await other.stop();
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "upload_hosts: each entry must be an origin",
  fn: async () => {
    const down = await FakeRegistry.start();
    try {
      for (
        const bad of ["https://data.example.com/v2", "ftp://x", "data.example.com", "https://u:p@x"]
      ) {
        let msg = "";
        try {
          await withServer({ config: config(down, [bad]) }, () => Promise.resolve());
        } catch (e) {
          msg = (e as Error).message;
        }
        assert.match(msg, /exited \(2\)/, bad);
        assert.match(msg, /downstream\[0\]\.upload_hosts\[0\]: .* must be an origin/, msg);
      }
    } finally {
      await down.close();
    }
  },
});
