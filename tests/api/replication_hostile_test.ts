// A downstream answering garbage (issue: replication, Bad input): HTML error pages, bodies cut
// short of their Content-Length, redirect loops, a 2xx without the Location an upload needs, and
// a manifest HEAD naming another digest. Each job ends in the failed list with a clear
// last_error after its retries, the local registry keeps serving and holds exactly what was
// pushed, and nothing answers 500.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, withServer } from "../helpers/server.ts";
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

type Mode = "html" | "truncated" | "redirect-loop" | "no-location" | "wrong-digest";

/** A registry-shaped server that misbehaves the way `mode` says. */
function hostile(mode: Mode) {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (r) => {
    const u = new URL(r.url);
    seen.push(`${r.method} ${u.pathname}`);
    await r.body?.cancel();
    if (u.pathname === "/v2/") return new Response("{}", { status: 200 });
    switch (mode) {
      case "html":
        return new Response("<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", {
          status: 502,
          headers: { "content-type": "text/html" },
        });
      case "truncated": {
        // The upload starts; its PATCH fails with an error body cut short of its Content-Length.
        if (r.method === "HEAD") return new Response(null, { status: 404 });
        if (r.method === "POST") {
          return new Response(null, { status: 202, headers: { location: "/v2/upload/1" } });
        }
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(new TextEncoder().encode('{"errors":[{"code":"UNKN'));
            c.error(new Error("cut"));
          },
        });
        return new Response(body, { status: 500, headers: { "content-length": "4096" } });
      }
      case "redirect-loop":
        return new Response(null, { status: 307, headers: { location: u.pathname + u.search } });
      case "no-location":
        if (r.method === "HEAD") return new Response(null, { status: 404 });
        return new Response(null, { status: 202 });
      case "wrong-digest":
        if (r.method === "HEAD" && u.pathname.includes("/blobs/")) {
          return new Response(null, { status: 200, headers: { "content-length": "1" } });
        }
        if (r.method === "HEAD") {
          return new Response(null, {
            status: 200,
            headers: { "docker-content-digest": "sha256:" + "0".repeat(64) },
          });
        }
        return new Response('{"errors":[{"code":"MANIFEST_INVALID","message":"nope"}]}', {
          status: 400,
          headers: { "content-type": "application/json" },
        });
    }
  });
  const port = (server.addr as Deno.NetAddr).port;
  return { url: `http://127.0.0.1:${port}`, seen, stop: () => server.shutdown() };
}

const EXPECT: Record<Mode, RegExp> = {
  "html": /502/,
  "truncated": /PATCH upload .*500/,
  "redirect-loop": /redirect|307/i,
  "no-location": /Location/i,
  "wrong-digest": /400|MANIFEST_INVALID|nope/,
};

for (const mode of Object.keys(EXPECT) as Mode[]) {
  Deno.test({
    ...serverTestOpts,
    name:
      `replication to a hostile downstream (${mode}): dead-lettered with a clear error, nothing local harmed`,
    fn: async () => {
      const down = hostile(mode);
      try {
        await withServer({
          config: `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 50
backoff_max_ms = 200
max_attempts = 3

[[repository."app".downstream]]
name = "bad"
url = "${down.url}"
connect_timeout_secs = 2
read_timeout_secs = 3
`,
        }, async (s) => {
          const cfg = jsonBytes({ os: "linux", mode });
          const layer = unique(`hostile ${mode} `.repeat(200));
          await pushBlob(s.url, "app/x", cfg);
          await pushBlob(s.url, "app/x", layer);
          const body = imageManifest(await descOf(OCI_CONFIG, cfg), [
            await descOf(OCI_LAYER, layer),
          ]);
          const put = await req(s, "/v2/app/x/manifests/v1", {
            method: "PUT",
            body: body as BodyInit,
            headers: { "content-type": OCI_MANIFEST },
          });
          assert.equal(put.status, 201);
          let failed: { last_error: string; attempts: number }[] = [];
          await until("the dead letter", async () => {
            const r = await req(s, "/v2/_svc/jobs/failed?queue=replication");
            assert.equal(r.status, 200);
            failed = (await r.json()).failed;
            return failed.length > 0;
          });
          assert.match(failed[0].last_error, EXPECT[mode], failed[0].last_error);
          assert.ok(failed[0].last_error.length < 2000, "last_error is cut short");
          assert.ok(!/<html|<body/i.test(failed[0].last_error) || mode !== "html");
          assert.ok(down.seen.length > 0, "the downstream was contacted");
          // The local registry is untouched and serving.
          const m = await req(s, "/v2/app/x/manifests/v1", { headers: { accept: OCI_MANIFEST } });
          assert.equal(m.status, 200);
          assert.deepEqual(new Uint8Array(await m.arrayBuffer()), body);
          const b = await req(s, `/v2/app/x/blobs/${(await descOf(OCI_LAYER, layer)).digest}`);
          assert.deepEqual(new Uint8Array(await b.arrayBuffer()), layer);
          assert.ok(!/INTERNAL_ERROR/.test(s.output()), s.output().slice(-2000));
        });
      } finally {
        await down.stop();
      }
    },
  });
}
