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

Deno.test("guardBody: a real fetch body is read in large pieces, byte for byte", async () => {
  const data = new Uint8Array(8 << 20);
  for (let i = 0; i < data.length; i++) data[i] = (i * 31 + (i >> 13)) & 255;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response(data),
  );
  try {
    const res = await fetch(`http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/`);
    const ends: (UpstreamError | null)[] = [];
    const { body } = guarded(res, ends);
    const got = new Uint8Array(data.length);
    let at = 0;
    let largest = 0;
    for await (const chunk of body) {
      got.set(chunk, at);
      at += chunk.byteLength;
      largest = Math.max(largest, chunk.byteLength);
      // each piece owns exactly its bytes (copied out of the reused read buffer)
      assert.equal(chunk.buffer.byteLength, chunk.byteLength);
    }
    assert.equal(at, data.length);
    assert.deepEqual(got, data);
    assert.deepEqual(ends, [null]);
    // BYOB reads take what has arrived: more than the default reader's ~58 KiB chunks
    assert.ok(largest > 64 * 1024, `largest piece ${largest} bytes`);
  } finally {
    await server.shutdown();
  }
});
