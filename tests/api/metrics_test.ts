// SPEC §Health and metrics: GET /metrics in the Prometheus text format, counters that move with
// requests, and the `metrics` action under the access policy.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, pushImage, type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

interface Exposition {
  types: Map<string, string>;
  /** `name{k="v",...}` with labels sorted → value */
  samples: Map<string, number>;
}

/** A strict little parser: every line is a comment, a sample, or the final empty line. */
function parse(text: string): Exposition {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  assert.ok(text.endsWith("\n"), "ends with a newline");
  for (const line of text.slice(0, -1).split("\n")) {
    if (line.startsWith("# HELP ")) continue;
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      assert.match(type, /^(counter|gauge|histogram|summary|untyped)$/, line);
      types.set(name, type);
      continue;
    }
    const m = LINE.exec(line);
    assert.ok(m, `unparsable line: ${JSON.stringify(line)}`);
    const labels: string[] = [];
    if (m[2]) {
      LABEL.lastIndex = 0;
      while (LABEL.lastIndex < m[2].length) {
        const l = LABEL.exec(m[2]);
        assert.ok(l, `bad labels in ${line}`);
        labels.push(`${l[1]}="${l[2]}"`);
      }
    }
    const base = m[1].replace(/_(bucket|sum|count)$/, "");
    assert.ok(types.has(m[1]) || types.has(base), `no TYPE for ${m[1]}`);
    const v = m[3] === "+Inf" ? Infinity : Number(m[3]);
    assert.ok(!Number.isNaN(v), line);
    samples.set(`${m[1]}{${labels.sort().join(",")}}`, v);
  }
  return { types, samples };
}

/** Label order does not matter: `key("x", {b: "1", a: "2"})` → `x{a="2",b="1"}`. */
function key(name: string, labels: Record<string, string> = {}): string {
  return `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort().join(",")}}`;
}

const basic = (user: string, pw: string) => ({ authorization: `Basic ${btoa(`${user}:${pw}`)}` });
const ADMIN = basic("x", "metrics-pw");

async function scrape(s: TestServer): Promise<Exposition> {
  const r = await req(s, "/metrics", { headers: ADMIN });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.equal(r.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  return parse(text);
}

const requests = (e: Exposition, action: string, method: string, status: number) =>
  e.samples.get(key("wharf_http_requests_total", { action, method, status: String(status) })) ??
    0;

Deno.test({
  name: "metrics exposition",
  ...serverTestOpts,
  fn: async (t) => {
    const hash = await hashPassword("metrics-pw");
    // Everything but metrics for everyone; metrics only for an authenticated caller.
    const config = `
[auth.identity.x]
username = "x"
password = ${JSON.stringify(hash)}

[global.access_policy]
default = "deny"
rules = [
  'request.action != "metrics"',
  'request.action == "metrics" && has(identity.username) && identity.username == "x"',
]
`;
    await withServer({ config }, async (s) => {
      await t.step("anonymous /metrics → 401 with a challenge; the rule lets x in", async () => {
        const r = await req(s, "/metrics");
        assert.equal(r.status, 401);
        assert.match(r.headers.get("www-authenticate") ?? "", /^Basic /);
        await r.body?.cancel();
        const ok = await req(s, "/metrics", { headers: ADMIN });
        assert.equal(ok.status, 200);
        await ok.body?.cancel();
        const head = await req(s, "/metrics", { method: "HEAD", headers: ADMIN });
        assert.equal(head.status, 200);
        assert.equal((await head.arrayBuffer()).byteLength, 0);
      });

      const layer = new Uint8Array(200_000).map((_, i) => i * 7);
      const img = await pushImage(s.url, "metrics/app", "v1", { layer });

      await t.step("request counters move by exactly the requests made", async () => {
        const before = await scrape(s);
        for (let i = 0; i < 3; i++) {
          const r = await req(s, "/v2/metrics/app/manifests/v1");
          assert.equal(r.status, 200);
          await r.arrayBuffer();
        }
        for (let i = 0; i < 2; i++) {
          const r = await req(s, "/v2/metrics/app/manifests/v1", {
            method: "PUT",
            body: img.body as BodyInit,
            headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
          });
          assert.equal(r.status, 201);
          await r.body?.cancel();
        }
        for (let i = 0; i < 2; i++) {
          const r = await req(s, `/v2/metrics/app/blobs/${img.layer}`);
          assert.equal(r.status, 200);
          assert.equal((await r.arrayBuffer()).byteLength, layer.length);
        }
        const missing = await req(s, "/v2/metrics/app/manifests/nope");
        assert.equal(missing.status, 404);
        await missing.body?.cancel();
        const after = await scrape(s);

        const delta = (a: string, m: string, st: number) =>
          requests(after, a, m, st) - requests(before, a, m, st);
        assert.equal(delta("get-manifest", "GET", 200), 3);
        assert.equal(delta("put-manifest", "PUT", 201), 2);
        assert.equal(delta("get-blob", "GET", 200), 2);
        assert.equal(delta("get-manifest", "GET", 404), 1);
        assert.equal(delta("metrics", "GET", 200), 1, "the first scrape is counted by the second");
        const dur = (e: Exposition) =>
          e.samples.get(key("wharf_http_request_duration_seconds_count", { action: "get-blob" })) ??
            0;
        assert.equal(dur(after) - dur(before), 2);
        assert.equal(after.types.get("wharf_http_request_duration_seconds"), "histogram");

        const out = (e: Exposition) => e.samples.get(key("wharf_http_response_bytes_total"))!;
        assert.ok(out(after) - out(before) >= 2 * layer.length, "bytes out cover both blobs");
        const inb = (e: Exposition) => e.samples.get(key("wharf_http_request_bytes_total"))!;
        assert.ok(inb(after) - inb(before) >= 2 * img.body.length, "manifest bodies read");
      });

      await t.step("auth attempts count a failed Basic login", async () => {
        const attempts = (e: Exposition, method: string, result: string) =>
          e.samples.get(key("wharf_auth_attempts_total", { method, result })) ?? 0;
        const before = await scrape(s);
        const r = await req(s, "/v2/", { headers: basic("x", "wrong") });
        assert.equal(r.status, 401);
        await r.body?.cancel();
        const anon = await req(s, "/v2/");
        assert.equal(anon.status, 200);
        await anon.body?.cancel();
        const after = await scrape(s);
        assert.equal(attempts(after, "basic", "failed") - attempts(before, "basic", "failed"), 1);
        assert.equal(
          attempts(after, "anonymous", "anonymous") - attempts(before, "anonymous", "anonymous"),
          1,
        );
        // the `after` scrape itself authenticated as x
        assert.equal(attempts(after, "basic", "ok") - attempts(before, "basic", "ok"), 1);
      });

      await t.step("gauges and store histograms are present and have samples", async () => {
        const start = await req(s, "/v2/metrics/app/blobs/uploads/", { method: "POST" });
        assert.equal(start.status, 202);
        await start.body?.cancel();
        const e = await scrape(s);
        assert.equal(e.types.get("wharf_http_requests_in_flight"), "gauge");
        assert.ok(e.samples.get(key("wharf_http_requests_in_flight"))! >= 1, "the scrape itself");
        assert.ok(e.samples.get(key("wharf_upload_sessions_open"))! >= 1);
        assert.ok(
          e.samples.get(key("wharf_kv_operation_duration_seconds_count", { op: "get" }))! > 0,
        );
        assert.ok(
          e.samples.get(key("wharf_kv_operation_duration_seconds_count", { op: "commit" }))! > 0,
        );
        assert.ok(
          e.samples.get(key("wharf_blob_store_operation_duration_seconds_count", { op: "read" }))! >
            0,
        );
        assert.ok(e.samples.get(key("process_resident_memory_bytes"))! > 0);
        assert.equal(e.samples.get(key("wharf_scrub_reclaimed_total", { kind: "blobs" })), 0);
      });

      await t.step("an upload's body bytes are counted through the BYOB path", async () => {
        const before = await scrape(s);
        const data = new Uint8Array(300_000).fill(3);
        await pushBlob(s.url, "metrics/app", data);
        const after = await scrape(s);
        const inb = (e: Exposition) => e.samples.get(key("wharf_http_request_bytes_total"))!;
        assert.equal(inb(after) - inb(before), data.length);
      });
    });
  },
});
