// Replicated deletes to a downstream answering garbage (issue 24, Bad input): an HTML error page
// or a redirect loop to the DELETE, a 400 that is no OCI error, and a tag HEAD (the digest path
// of a registry that deletes by digest only) naming no usable digest. Each delete job ends in the
// failed list with a clear last_error after its retries, never deletes a guessed digest, and the
// local registry keeps what it holds; nothing answers 500.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";
import { until } from "../helpers/until.ts";

type Mode = "html" | "redirect-loop" | "bad-400" | "garbage-digest" | "no-digest";

const OCI_ERROR = (code: string) =>
  new Response(JSON.stringify({ errors: [{ code, message: code.toLowerCase() }] }), {
    status: code === "UNSUPPORTED" ? 405 : 400,
    headers: { "content-type": "application/json" },
  });

/** Accepts pushes (every blob present, every manifest PUT taken); misbehaves on deletes. */
function hostile(mode: Mode) {
  const deletes: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (r) => {
    const u = new URL(r.url);
    await r.body?.cancel();
    if (u.pathname === "/v2/") return new Response("{}", { status: 200 });
    if (u.pathname.includes("/blobs/")) return new Response(null, { status: 200 });
    if (r.method === "PUT") return new Response(null, { status: 201 });
    if (r.method === "DELETE") deletes.push(u.pathname);
    switch (mode) {
      case "html":
        return new Response("<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", {
          status: 502,
          headers: { "content-type": "text/html" },
        });
      case "redirect-loop":
        return new Response(null, { status: 307, headers: { location: u.pathname } });
      case "bad-400":
        return new Response("<html><body>Bad Request</body></html>", { status: 400 });
      case "garbage-digest":
        if (r.method === "DELETE") return OCI_ERROR("DIGEST_INVALID");
        return new Response(null, {
          status: 200,
          headers: { "docker-content-digest": "<script>sha256:zz</script>" },
        });
      case "no-digest":
        if (r.method === "DELETE") return OCI_ERROR("UNSUPPORTED");
        return new Response(null, { status: 200, headers: { "content-type": "text/html" } });
    }
  });
  const port = (server.addr as Deno.NetAddr).port;
  return { url: `http://127.0.0.1:${port}`, deletes, stop: () => server.shutdown() };
}

const EXPECT: Record<Mode, RegExp> = {
  "html": /DELETE manifest app\/x:gone: 502 Bad Gateway/,
  "redirect-loop": /redirect/i,
  "bad-400": /DELETE manifest app\/x:gone: 400.*Bad Request/,
  "garbage-digest": /HEAD manifest app\/x:gone: answered without a usable Docker-Content-Digest/,
  "no-digest": /HEAD manifest app\/x:gone: answered without a usable Docker-Content-Digest/,
};

for (const mode of Object.keys(EXPECT) as Mode[]) {
  Deno.test({
    ...serverTestOpts,
    name: `a replicated delete to a hostile downstream (${mode}): a clear dead letter, no guess`,
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
mode = "event"
connect_timeout_secs = 2
read_timeout_secs = 3
max_redirects = 3
`,
        }, async (s) => {
          const kept = await pushImage(s.url, "app/x", "kept");
          await pushImage(s.url, "app/x", "gone");
          await until("the pushes replicated", async () => {
            const r = await (await req(s, "/v2/_svc/jobs/list?queue=replication")).json();
            return r.jobs.length === 0;
          });
          const del = await req(s, "/v2/app/x/manifests/gone", { method: "DELETE" });
          assert.equal(del.status, 202);
          await del.body?.cancel();
          let failed: { kind: string; last_error: string; attempts: number }[] = [];
          await until("the dead letter", async () => {
            failed = (await (await req(s, "/v2/_svc/jobs/failed?queue=replication")).json())
              .failed;
            return failed.length > 0;
          });
          assert.equal(failed.length, 1);
          assert.equal(failed[0].kind, "delete-tag");
          assert.equal(failed[0].attempts, 3, "retried: a garbage answer is no unsupported delete");
          assert.match(failed[0].last_error, EXPECT[mode], failed[0].last_error);
          // an HTML page is reduced to its text; a garbage header is quoted, cut short
          assert.ok(!/<html|<body/i.test(failed[0].last_error), failed[0].last_error);
          // never a digest delete guessed from a garbage answer
          assert.ok(
            down.deletes.every((p) => p.endsWith("/manifests/gone")),
            down.deletes.join(" "),
          );
          const st = await (await req(s, "/v2/_svc/replication/status")).json();
          const d = st.downstreams[0];
          assert.equal(d.health, "failing");
          assert.equal(d.failed, 1);
          assert.equal(d.last_error.outcome, "failed");
          assert.equal(d.outcomes.unsupported, 0);
          // the local registry holds what it held
          const m = await req(s, "/v2/app/x/manifests/kept", {
            headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
          });
          assert.equal(m.status, 200);
          assert.deepEqual(new Uint8Array(await m.arrayBuffer()), kept.body);
          const g = await req(s, "/v2/app/x/manifests/gone", { method: "HEAD" });
          await g.body?.cancel();
          assert.equal(g.status, 404);
          assert.ok(!/INTERNAL_ERROR/.test(s.output()), s.output().slice(-2000));
        });
      } finally {
        await down.stop();
      }
    },
  });
}
