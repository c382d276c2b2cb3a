import assert from "node:assert/strict";
import { EventLoopLag } from "./event_loop.ts";
import { Metrics } from "./metrics.ts";

Deno.test("event loop lag: p99 and max of the last minute's samples", () => {
  const lag = new EventLoopLag();
  assert.deepEqual(lag.summary(), { p99: 0, max: 0 });
  for (let i = 0; i < 1000; i++) lag.record(i === 500 ? 2 : i < 990 ? 0.001 : 0.2);
  const s = lag.summary();
  assert.equal(s.max, 2);
  assert.equal(s.p99, 0.2);
});

Deno.test("event loop lag: a blocked thread shows in /metrics", async () => {
  const m = new Metrics();
  m.watchEventLoop();
  try {
    await new Promise((r) => setTimeout(r, 120));
    const until = performance.now() + 300;
    while (performance.now() < until) { /* the serving thread, busy */ }
    await new Promise((r) => setTimeout(r, 120));
    const text = await m.render();
    const max = Number(/wharf_event_loop_lag_seconds\{quantile="1"\} (\S+)/.exec(text)?.[1]);
    assert.ok(max >= 0.2 && max < 5, `max ${max}`);
  } finally {
    m.stopWatching();
  }
});
