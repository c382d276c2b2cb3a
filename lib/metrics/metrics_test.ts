import assert from "node:assert/strict";
import {
  Counter,
  countingByteStream,
  countingStream,
  Histogram,
  InstrumentSet,
  Metrics,
} from "./mod.ts";

function sample(text: string, series: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    if (line.slice(0, i) === series) return Number(line.slice(i + 1));
  }
  return undefined;
}

Deno.test("counter and histogram render in the text format, cumulative buckets", async () => {
  const set = new InstrumentSet();
  const c = set.add(new Counter("x_total", "a\nhelp", ["a", "b"]));
  const h = set.add(new Histogram("lat_seconds", "latency", ["op"], [0.1, 1]));
  c.inc(["1", 'q"\\\n']);
  c.inc(["1", 'q"\\\n'], 2);
  h.observe(0.05, ["get"]);
  h.observe(0.1, ["get"]);
  h.observe(0.5, ["get"]);
  h.observe(7, ["get"]);
  const text = await set.render();
  assert.match(text, /^# HELP x_total a\\nhelp\n# TYPE x_total counter\n/);
  assert.equal(sample(text, 'x_total{a="1",b="q\\"\\\\\\n"}'), 3);
  assert.match(text, /# TYPE lat_seconds histogram/);
  assert.equal(sample(text, 'lat_seconds_bucket{op="get",le="0.1"}'), 2);
  assert.equal(sample(text, 'lat_seconds_bucket{op="get",le="1"}'), 3);
  assert.equal(sample(text, 'lat_seconds_bucket{op="get",le="+Inf"}'), 4);
  assert.equal(sample(text, 'lat_seconds_count{op="get"}'), 4);
  assert.equal(sample(text, 'lat_seconds_sum{op="get"}'), 7.65);
  assert.ok(text.endsWith("\n"));
});

Deno.test("label count is checked; names are unique", () => {
  const set = new InstrumentSet();
  const c = set.add(new Counter("a_total", "h", ["x"]));
  assert.throws(() => c.inc([]), /expected 1 label/);
  assert.throws(() => set.add(new Counter("a_total", "h", [])), /twice/);
});

Deno.test("Metrics: requests, in-flight, auth, stores, scrub, process, lazy gauge", async () => {
  const m = new Metrics();
  m.requestStarted();
  m.requestStarted();
  m.requestFinished("get-blob", "GET", 200, 0.002);
  m.bytesOut(10);
  m.bytesIn(3);
  m.authAttempt("basic", "failed");
  m.observeKv("get", 0.00002);
  m.observeBlobStore("read", 0.001);
  let counted = 0;
  m.countUploadSessionsWith(() => Promise.resolve(++counted));
  m.scrubFinished({ ok: true, seconds: 1.5, reclaimed: { blobs: 2, bytes: 100, uploads: 0 } });
  const text = await m.render();
  assert.equal(m.contentType, "text/plain; version=0.0.4; charset=utf-8");
  assert.equal(
    sample(text, 'wharf_http_requests_total{action="get-blob",method="GET",status="200"}'),
    1,
  );
  assert.equal(sample(text, 'wharf_http_request_duration_seconds_count{action="get-blob"}'), 1);
  assert.equal(sample(text, "wharf_http_requests_in_flight"), 1);
  assert.equal(sample(text, "wharf_http_response_bytes_total"), 10);
  assert.equal(sample(text, "wharf_http_request_bytes_total"), 3);
  assert.equal(sample(text, 'wharf_auth_attempts_total{method="basic",result="failed"}'), 1);
  assert.equal(sample(text, 'wharf_kv_operation_duration_seconds_count{op="get"}'), 1);
  assert.equal(sample(text, 'wharf_blob_store_operation_duration_seconds_count{op="read"}'), 1);
  assert.equal(sample(text, "wharf_upload_sessions_open"), 1);
  assert.equal(sample(text, 'wharf_scrub_runs_total{result="ok"}'), 1);
  assert.equal(sample(text, 'wharf_scrub_runs_total{result="failed"}'), 0);
  assert.equal(sample(text, 'wharf_scrub_reclaimed_total{kind="bytes"}'), 100);
  assert.equal(sample(text, 'wharf_scrub_reclaimed_total{kind="pulls"}'), 0);
  assert.equal(sample(text, "wharf_scrub_duration_seconds"), 1.5);
  assert.ok(sample(text, "wharf_scrub_last_run_timestamp_seconds")! > 1.7e9);
  assert.ok(sample(text, "process_resident_memory_bytes")! > 0);
  assert.ok(sample(text, 'wharf_heap_bytes{kind="used"}')! > 0);
  assert.equal(sample(await m.render(), "wharf_upload_sessions_open"), 2, "counted per scrape");
});

Deno.test("a failing collector keeps its last value and the scrape still answers", async () => {
  const m = new Metrics();
  m.countUploadSessionsWith(() => Promise.reject(new Error("kv down")));
  const text = await m.render();
  assert.equal(sample(text, "wharf_upload_sessions_open"), 0);
});

function source(chunks: number[], bytes: boolean): ReadableStream<Uint8Array> {
  let i = 0;
  if (!bytes) {
    return new ReadableStream({
      pull(ctl) {
        if (i === chunks.length) return ctl.close();
        ctl.enqueue(new Uint8Array(chunks[i++]).fill(7));
      },
    });
  }
  return new ReadableStream({
    type: "bytes",
    pull(ctl) {
      const req = ctl.byobRequest!;
      if (i === chunks.length) {
        ctl.close();
        req.respond(0);
        return;
      }
      const n = Math.min(chunks[i++], req.view!.byteLength);
      new Uint8Array(req.view!.buffer, req.view!.byteOffset, n).fill(7);
      req.respond(n);
    },
    autoAllocateChunkSize: 1024,
  });
}

Deno.test("countingStream counts what flows through", async () => {
  let n = 0;
  const out = await new Response(countingStream(source([3, 5, 1000], false), (b) => n += b))
    .arrayBuffer();
  assert.equal(out.byteLength, 1008);
  assert.equal(n, 1008);
});

Deno.test("countingByteStream keeps BYOB reads into one buffer and counts", async () => {
  for (const bytes of [true, false]) {
    let n = 0;
    const s = countingByteStream(source([100, 200, 300], bytes), (b) => n += b);
    const reader = s.getReader({ mode: "byob" });
    let buf = new ArrayBuffer(4096);
    let total = 0;
    for (;;) {
      const r = await reader.read(new Uint8Array(buf));
      if (r.done) break;
      assert.ok(r.value.every((x) => x === 7));
      total += r.value.byteLength;
      buf = r.value.buffer as ArrayBuffer;
    }
    assert.equal(total, 600, `bytes source: ${bytes}`);
    assert.equal(n, 600);
    // default readers work too
    let m = 0;
    const all = await new Response(countingByteStream(source([10, 20], bytes), (b) => m += b))
      .arrayBuffer();
    assert.equal(all.byteLength, 30);
    assert.equal(m, 30);
  }
});

Deno.test("countingByteStream cancel reaches the source", async () => {
  let cancelled = false;
  const src = new ReadableStream<Uint8Array>({
    type: "bytes",
    pull() {},
    cancel() {
      cancelled = true;
    },
  });
  await countingByteStream(src, () => {}).cancel();
  assert.ok(cancelled);
});
