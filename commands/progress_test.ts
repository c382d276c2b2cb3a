// The progress reporter's four modes on a fake clock: the terminal line (rewritten in place at
// most 4 times a second, items above it, cleared before the summary, cut to the width), plain
// lines every interval, JSON lines, quiet; and its figures (done/total, %, bytes, rate, time left).
import assert from "node:assert/strict";
import {
  bytesText,
  durationText,
  progressMode,
  Reporter,
  type ReporterOptions,
} from "./progress.ts";

function reporter(mode: ReporterOptions["mode"], opts: Partial<ReporterOptions> = {}) {
  const clock = { now: 0 };
  const out: string[] = [];
  const err: string[] = [];
  const r = new Reporter("reindex", {
    mode,
    out: (s) => out.push(s),
    err: (l) => err.push(l),
    now: () => clock.now,
    columns: () => 200,
    ...opts,
  });
  return { r, clock, out, err, text: () => out.join("") };
}

Deno.test("mode: --json, then --quiet, then whether standard output is a terminal", () => {
  assert.equal(progressMode({ quiet: false, json: true }, true), "json");
  assert.equal(progressMode({ quiet: true, json: false }, true), "quiet");
  assert.equal(progressMode({ quiet: false, json: false }, true), "terminal");
  assert.equal(progressMode({ quiet: false, json: false }, false), "lines");
});

Deno.test("terminal: one line rewritten in place, at most 4 times a second", () => {
  const { r, clock, out, text } = reporter("terminal");
  // 100 updates a second for 2 s.
  for (let i = 0; i <= 200; i++) {
    clock.now = i * 10;
    r.sink({ unit: "namespaces", done: i, total: 400, note: `${i} layer(s)` });
  }
  const draws = out.filter((s) => s.startsWith("\r") && s.endsWith("\x1b[K") && s.length > 4);
  assert.ok(draws.length >= 8 && draws.length <= 9, `${draws.length} redraws`);
  assert.ok(!text().includes("\n"), "no new line while it runs");
  const last = draws[draws.length - 1].slice(1, -3);
  // 200 of 400 at 100/s: 2 s left.
  assert.match(
    last,
    /^reindex: 200\/400 namespaces \(50%\) · 200 layer\(s\) · 100 namespaces\/s · 2 s left$/,
  );

  // An item line clears the progress line and scrolls above it; the line comes back at once
  // when the last draw is REDRAW_EVERY_MS old, else with the next update.
  out.length = 0;
  r.line("index sha256:abc (team/app)");
  assert.deepEqual(out, ["\r\x1b[K", "index sha256:abc (team/app)\n"]);
  r.line("index sha256:def (team/app)");
  assert.deepEqual(out.slice(2), ["index sha256:def (team/app)\n"], "nothing to clear");
  clock.now += 250;
  r.line("index sha256:123 (team/app)");
  assert.equal(out[3], "index sha256:123 (team/app)\n");
  assert.match(out[4], /^\rreindex: 200\/400 namespaces/);
  // The summary clears it for good.
  out.length = 0;
  r.summary("reindex: 400 namespace(s), 3 layer(s) in 4.0 s; queued 3");
  assert.deepEqual(out, ["\r\x1b[K", "reindex: 400 namespace(s), 3 layer(s) in 4.0 s; queued 3\n"]);
  r.sink({ unit: "namespaces", done: 400, total: 400 });
  assert.equal(out.length, 2, "nothing after the summary");
});

Deno.test("terminal: a phase change redraws at once; the line is cut to the width", () => {
  const { r, clock, out } = reporter("terminal", { columns: () => 40 });
  r.sink({ phase: "references", unit: "keys", done: 0, total: null });
  clock.now = 10;
  r.sink({ phase: "blobs", unit: "objects", done: 1, total: null });
  const draws = out.filter((s) => s.startsWith("\r") && s.length > 4);
  assert.equal(draws.length, 2);
  assert.match(draws[1], /^\rreindex: blobs 1 objects/);
  for (const d of draws) assert.ok(d.length - 4 <= 39, JSON.stringify(d));
  r.error("wharf: something failed");
  assert.ok(out.includes("\r\x1b[K"), "the line is cleared before an error");
});

Deno.test("lines: a plain line every interval, none before; items as before; the summary", () => {
  const { r, clock, out } = reporter("lines", { intervalMs: 10_000 });
  for (let t = 0; t <= 35_000; t += 500) {
    clock.now = t;
    r.sink({
      unit: "blobs",
      done: t / 500,
      total: 100,
      bytes: (t / 1000) * 2 ** 20,
      bytesTotal: 50 * 2 ** 20,
    });
  }
  r.line("would delete team/app:v1");
  r.summary("scrub: 70 blob(s) reclaimed");
  const text = out.join("");
  assert.ok(!text.includes("\r"));
  const shown = text.split("\n").filter((l) => l.startsWith("reindex: "));
  assert.equal(shown.length, 3, text);
  assert.match(shown[0], /^reindex: 20\/100 blobs \(20%\) · 10 MiB of 50 MiB · /);
  // Rates over the last 10 s: 2 blobs and 1 MiB a second; the bytes say the time left.
  assert.match(
    shown[2],
    /^reindex: 60\/100 blobs \(60%\) · 30 MiB of 50 MiB · 2.00 blobs\/s, 1.0 MiB\/s · 20 s left$/,
  );
  assert.deepEqual(text.split("\n").slice(-3), [
    "would delete team/app:v1",
    "scrub: 70 blob(s) reclaimed",
    "",
  ]);
});

Deno.test("lines: an unknown total shows done and rate, no percentage or time left", () => {
  const { r, clock, out } = reporter("lines", { intervalMs: 1000 });
  for (let t = 0; t <= 3000; t += 100) {
    clock.now = t;
    r.sink({ unit: "layers", done: t / 10, total: null });
  }
  const shown = out.join("").split("\n").filter(Boolean);
  assert.equal(shown.length, 3);
  assert.equal(shown[2], "reindex: 300 layers · 100 layers/s");
});

Deno.test("json: events at most once an interval and per phase change, items, one summary", () => {
  const { r, clock, out } = reporter("json", { intervalMs: 1000 });
  for (let t = 0; t <= 2500; t += 100) {
    clock.now = t;
    r.sink({ phase: t < 2000 ? "blobs" : "reclaim", unit: "blobs", done: t / 100, total: null });
  }
  r.line("would reclaim sha256:abc");
  r.error("wharf: one error");
  r.result("Debian: updated, 1.0 MiB", { ecosystem: "Debian" });
  r.summary("scrub: 3 blob(s) reclaimed", { blobs: 3, usageDrift: 0 });
  const all = out.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const events = all.filter((e) => e.type === "progress");
  // t=0, 1000 (blobs), 2000 (phase change), none more within the second.
  assert.deepEqual(events.map((e) => [e.phase, e.done]), [["blobs", 0], ["blobs", 10], [
    "reclaim",
    20,
  ]]);
  assert.deepEqual(Object.keys(events[1]).sort(), [
    "command",
    "done",
    "elapsed_secs",
    "eta_secs",
    "phase",
    "rate",
    "total",
    "type",
    "unit",
  ]);
  assert.equal(events[1].rate, 10);
  assert.deepEqual(all.slice(-3), [
    { type: "line", command: "reindex", text: "would reclaim sha256:abc" },
    { type: "result", command: "reindex", line: "Debian: updated, 1.0 MiB", ecosystem: "Debian" },
    {
      type: "summary",
      command: "reindex",
      line: "scrub: 3 blob(s) reclaimed",
      elapsed_secs: 2.5,
      blobs: 3,
      usage_drift: 0,
    },
  ]);
});

Deno.test("quiet: the summary and errors only", () => {
  const { r, out, err } = reporter("quiet");
  r.sink({ unit: "namespaces", done: 1, total: 2 });
  r.line("index sha256:abc (team/app)");
  r.error("wharf: failed");
  r.summary("reindex: done");
  assert.deepEqual(out, ["reindex: done\n"]);
  assert.deepEqual(err, ["wharf: failed"]);
});

Deno.test("figures: bytes and durations as people read them", () => {
  assert.deepEqual(
    [0, 1023, 1024, 15_000, 5 << 20, 3.5 * 2 ** 30].map(bytesText),
    ["0 B", "1023 B", "1.0 KiB", "15 KiB", "5.0 MiB", "3.5 GiB"],
  );
  assert.deepEqual([0.4, 59, 61, 3599, 3661].map(durationText), [
    "0 s",
    "59 s",
    "1 min 01 s",
    "59 min 59 s",
    "1 h 01 min",
  ]);
});
