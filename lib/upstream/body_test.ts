import assert from "node:assert/strict";
import { declaredLength, guardBody } from "./body.ts";
import { UpstreamError } from "./errors.ts";

// Deno's fetch never hands over more bytes than Content-Length, so the guard's own checks are
// driven here with responses built in memory.

function stream(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const x of chunks) c.enqueue(x);
      c.close();
    },
  });
}

function guarded(res: Response, ends: (UpstreamError | null)[] = []) {
  let aborted = 0;
  const body = guardBody(res, {
    readTimeoutMs: 1000,
    what: "GET blob x",
    error: (kind, what, opts) => new UpstreamError(kind, "http://up", what, opts),
    abort: () => aborted++,
    onEnd: (e) => ends.push(e),
  });
  return { body, aborted: () => aborted };
}

Deno.test("guardBody: bytes beyond Content-Length error the stream", async () => {
  const res = new Response(stream(new Uint8Array(3), new Uint8Array(3)), {
    headers: { "content-length": "5" },
  });
  const ends: (UpstreamError | null)[] = [];
  const g = guarded(res, ends);
  await assert.rejects(new Response(g.body).arrayBuffer(), (e: unknown) => {
    assert.ok(e instanceof UpstreamError);
    assert.equal(e.kind, "invalid");
    assert.match(e.message, /GET blob x: body longer than its Content-Length 5/);
    return true;
  });
  assert.equal(g.aborted(), 1);
  assert.equal(ends.length, 1);
  assert.equal(ends[0]?.kind, "invalid");
});

Deno.test("guardBody: a clean end short of Content-Length is an error", async () => {
  const res = new Response(stream(new Uint8Array(3)), { headers: { "content-length": "5" } });
  await assert.rejects(
    new Response(guarded(res).body).arrayBuffer(),
    /body ended after 3 of 5 bytes/,
  );
});

Deno.test("guardBody: exact, undeclared and empty bodies pass", async () => {
  const exact = new Response(stream(new Uint8Array(2), new Uint8Array(3)), {
    headers: { "content-length": "5" },
  });
  const ends: (UpstreamError | null)[] = [];
  assert.equal((await new Response(guarded(exact, ends).body).arrayBuffer()).byteLength, 5);
  assert.deepEqual(ends, [null]);
  const undeclared = new Response(stream(new Uint8Array(7)));
  assert.equal((await new Response(guarded(undeclared).body).arrayBuffer()).byteLength, 7);
  const empty = new Response(null, { headers: { "content-length": "0" } });
  assert.equal((await new Response(guarded(empty).body).arrayBuffer()).byteLength, 0);
  const missing = new Response(null, { headers: { "content-length": "4" } });
  await assert.rejects(new Response(guarded(missing).body).arrayBuffer(), /no body/);
});

Deno.test("declaredLength: only an identity-coded, well-formed Content-Length", () => {
  const h = (headers: Record<string, string>) => declaredLength(new Response(null, { headers }));
  assert.equal(h({ "content-length": "12" }), 12);
  assert.equal(h({}), null);
  assert.equal(h({ "content-length": "12", "content-encoding": "gzip" }), null);
  assert.equal(h({ "content-length": "12", "content-encoding": "identity" }), 12);
  assert.equal(h({ "content-length": "-1" }), null);
});
