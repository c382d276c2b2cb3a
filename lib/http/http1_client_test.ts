import assert from "node:assert/strict";
import { join } from "node:path";
import { makePki } from "../../tests/helpers/certs.ts";
import { Http1Client, Http1Error, type Http1Request } from "./http1_client.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const latin1 = new TextDecoder("latin1");

interface Seen {
  head: string;
  body: string;
  connection: number;
}

/**
 * A receiver written on raw TCP, so each test chooses exactly what goes on the wire: `answer`
 * returns the bytes to send for a request (null: send nothing, keep the connection open;
 * "close": close without answering), and whether to close the connection after them.
 */
function rawReceiver(
  answer: (req: Seen, n: number) => { bytes: string | null; close?: boolean },
) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: Seen[] = [];
  const conns: Deno.Conn[] = [];
  let accepted = 0;
  const serve = async (conn: Deno.Conn, connection: number) => {
    let buf = new Uint8Array(1 << 16);
    let have = 0;
    try {
      for (;;) {
        // latin1: one character per byte, so the indexes below are byte offsets.
        const text = latin1.decode(buf.subarray(0, have));
        const end = text.indexOf("\r\n\r\n");
        const len = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
        if (end < 0 || have < end + 4 + len) {
          if (have === buf.length) {
            const bigger = new Uint8Array(buf.length * 2);
            bigger.set(buf);
            buf = bigger;
          }
          const n = await conn.read(buf.subarray(have));
          if (n === null) return conn.close();
          have += n;
          continue;
        }
        const body = dec.decode(buf.subarray(end + 4, end + 4 + len));
        seen.push({ head: text.slice(0, end), body, connection });
        buf.copyWithin(0, end + 4 + len, have);
        have -= end + 4 + len;
        const req = seen[seen.length - 1];
        const a = answer(req, seen.length);
        if (a.bytes !== null) await conn.write(enc.encode(a.bytes));
        if (a.close) return conn.close();
      }
    } catch { /* closed by the test */ }
  };
  const loop = (async () => {
    try {
      for await (const conn of listener) {
        conns.push(conn);
        serve(conn, ++accepted);
      }
    } catch { /* closed */ }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    url: `http://127.0.0.1:${port}/hook?x=1`,
    seen,
    accepted: () => accepted,
    async stop() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* done */ }
      }
      await loop;
    },
  };
}

const NO_CONTENT = { bytes: "HTTP/1.1 204 No Content\r\n\r\n" };

/** A webhook-style POST: the status only, the answer's body never read. */
async function post(
  c: Http1Client,
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<number> {
  const req: Http1Request = {
    method: "POST",
    url,
    headers,
    body: new TextEncoder().encode(body),
    timeoutMs,
  };
  return (await c.request(req)).status;
}

Deno.test("http1_client: one kept-alive connection carries sequential POSTs, bytes as sent", async () => {
  const rx = rawReceiver(() => NO_CONTENT);
  const c = new Http1Client();
  try {
    for (let i = 0; i < 20; i++) {
      const status = await post(c, rx.url, { "X-Svc-Event-Id": `e${i}` }, `{"i":${i},"é":1}`, 2000);
      assert.equal(status, 204);
    }
    assert.equal(rx.accepted(), 1, "one connection for all");
    assert.equal(rx.seen.length, 20);
    const first = rx.seen[0];
    assert.match(first.head, /^POST \/hook\?x=1 HTTP\/1\.1\r\n/);
    assert.match(first.head, /\r\nHost: 127\.0\.0\.1:\d+\r\n/);
    assert.match(first.head, /\r\nX-Svc-Event-Id: e0\r\n/);
    // The length counts bytes, not characters.
    assert.match(first.head, /\r\nContent-Length: 14$/);
    assert.equal(first.body, '{"i":0,"é":1}');
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: concurrent POSTs each get a connection, and the pool reuses them", async () => {
  const rx = rawReceiver(() => ({ bytes: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }));
  const c = new Http1Client();
  try {
    for (let round = 0; round < 3; round++) {
      const got = await Promise.all(
        Array.from({ length: 4 }, (_, i) => post(c, rx.url, {}, `${round}-${i}`, 2000)),
      );
      assert.deepEqual(got, [200, 200, 200, 200]);
    }
    assert.equal(rx.seen.length, 12);
    assert.equal(rx.accepted(), 4, "the first round's four connections carry the later rounds");
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: Connection: close, chunked, unsized or partly sent bodies are not reused", async () => {
  const answers = [
    { bytes: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n" },
    { bytes: "HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" },
    { bytes: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n" },
    { bytes: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc" }, // the rest never comes
    { bytes: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok" },
    NO_CONTENT,
  ];
  const rx = rawReceiver((_, n) => answers[n - 1] ?? NO_CONTENT);
  const c = new Http1Client();
  try {
    const got = [];
    for (let i = 0; i < answers.length; i++) got.push(await post(c, rx.url, {}, "{}", 2000));
    assert.deepEqual(got, [200, 202, 200, 200, 200, 204]);
    assert.deepEqual(
      rx.seen.map((s) => s.connection),
      [1, 2, 3, 4, 5, 6],
      "each answer that does not end cleanly costs its connection",
    );
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: a pooled connection closed by the receiver is retried on a fresh one", async () => {
  // The receiver answers, keeps the connection, then drops it while idle (as a keep-alive
  // timeout does): the next POST meets the dead connection first.
  const rx = rawReceiver((_, n) => n === 1 ? { ...NO_CONTENT, close: true } : NO_CONTENT);
  const c = new Http1Client();
  try {
    assert.equal(await post(c, rx.url, {}, "a", 2000), 204);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(await post(c, rx.url, {}, "b", 2000), 204);
    assert.deepEqual(rx.seen.map((s) => [s.body, s.connection]), [["a", 1], ["b", 2]]);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: interim 1xx answers are skipped", async () => {
  const rx = rawReceiver(() => ({
    bytes: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" +
      "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
  }));
  const c = new Http1Client();
  try {
    assert.equal(await post(c, rx.url, {}, "{}", 2000), 201);
    assert.equal(await post(c, rx.url, {}, "{}", 2000), 201);
    assert.equal(rx.accepted(), 1);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: non-2xx statuses are returned as they are", async () => {
  const statuses = [500, 404, 302, 429];
  const rx = rawReceiver((_, n) => ({
    bytes: `HTTP/1.1 ${statuses[n - 1]} X\r\nContent-Length: 0\r\n\r\n`,
  }));
  const c = new Http1Client();
  try {
    const got = [];
    for (let i = 0; i < statuses.length; i++) got.push(await post(c, rx.url, {}, "{}", 2000));
    assert.deepEqual(got, statuses);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: silence, garbage, a huge head and a closed port end in a Http1Error", async () => {
  const c = new Http1Client();
  const silent = rawReceiver(() => ({ bytes: null }));
  try {
    const t0 = performance.now();
    await assert.rejects(
      post(c, silent.url, {}, "{}", 300),
      (e) => e instanceof Http1Error && e.timedOut && /no answer within 300 ms/.test(e.message),
    );
    const took = performance.now() - t0;
    assert.ok(took >= 290 && took < 3000, `timed out after ${took} ms`);
  } finally {
    await silent.stop();
  }
  const cases: [string, RegExp][] = [
    ["SSH-2.0-OpenSSH_9\r\n\r\n", /malformed answer/],
    ["HTTP/1.1 2000 OK\r\n\r\n", /malformed answer/],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", /malformed answer header/],
    [`HTTP/1.1 200 OK\r\nX: ${"a".repeat(70_000)}\r\n\r\n`, /head over 64 KiB/],
    ["HTTP/1.1 200 O", /closed mid-answer/],
    ["", /closed without an answer/],
  ];
  for (const [bytes, want] of cases) {
    const rx = rawReceiver(() => ({ bytes, close: true }));
    try {
      await assert.rejects(
        post(c, rx.url, {}, "{}", 2000),
        (e) => e instanceof Http1Error && !e.timedOut && want.test(e.message),
        JSON.stringify(bytes.slice(0, 40)),
      );
    } finally {
      await rx.stop();
    }
  }
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await assert.rejects(
    post(c, `http://127.0.0.1:${port}/`, {}, "{}", 2000),
    (e) => e instanceof Http1Error && !e.timedOut && /refused/i.test(e.message),
  );
  await assert.rejects(
    post(c, "http://127.0.0.1:1/", { "X-Bad": "a\r\nInjected: 1" }, "{}", 2000),
    (e) => e instanceof Http1Error && /bad header/.test(e.message),
  );
  c.close();
});

Deno.test("http1_client: https with the receiver's CA, and a clear error without it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-http-post-" });
  const pki = await makePki(dir);
  let n = 0;
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(pki.serverCert),
    key: await Deno.readTextFile(pki.serverKey),
    onListen: () => {},
  }, async (req) => {
    assert.equal(req.method, "POST");
    assert.equal(await req.text(), `{"n":${n}}`);
    n++;
    return new Response("fine", { status: 200 });
  });
  const url = `https://localhost:${(server.addr as Deno.NetAddr).port}/in`;
  const trusted = new Http1Client({ caCerts: [await Deno.readTextFile(pki.caCert)] });
  const untrusted = new Http1Client();
  try {
    assert.equal(await post(trusted, url, {}, `{"n":0}`, 5000), 200);
    assert.equal(await post(trusted, url, {}, `{"n":1}`, 5000), 200);
    await assert.rejects(
      post(untrusted, url, {}, "{}", 5000),
      (e) => e instanceof Http1Error && !e.timedOut && /certificate|UnknownIssuer/i.test(e.message),
    );
    assert.equal(n, 2);
  } finally {
    trusted.close();
    untrusted.close();
    await server.shutdown();
    await Deno.remove(join(dir), { recursive: true });
  }
});

Deno.test("http1_client: answers' bodies are read up to readBody, sized, chunked or to the close", async () => {
  const answers = [
    'HTTP/1.1 200 OK\r\nETag: "abc"\r\nContent-Length: 0\r\n\r\n',
    "HTTP/1.1 404 Not Found\r\nContent-Length: 21\r\n\r\n<Error>NoSuch</Error>",
    "HTTP/1.1 503 Slow Down\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n<Erro\r\n" +
    "b\r\nr>Slow</Err\r\n3\r\nor>\r\n0\r\nTrailer: t\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + "z".repeat(100000),
    "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-A: 2\r\nContent-Length: 2\r\n\r\nok",
  ];
  const rx = rawReceiver((_, n) => ({ bytes: answers[n - 1] ?? NO_CONTENT.bytes }));
  const c = new Http1Client();
  const big = new Uint8Array(3 << 20).map((_, i) => i % 251);
  try {
    const put = (readBody: number) =>
      c.request({
        method: "PUT",
        url: rx.url,
        headers: [["X-Amz-Date", "20261126T000000Z"], ["content-length", "1"], ["Host", "evil"]],
        body: big,
        timeoutMs: 5000,
        readBody,
      });
    const a = await put(65536);
    assert.equal(a.status, 200);
    assert.equal(a.headers.get("etag"), '"abc"');
    assert.deepEqual(a.body, new Uint8Array(0));
    const b = await put(65536);
    assert.equal(b.status, 404);
    assert.equal(new TextDecoder().decode(b.body!), "<Error>NoSuch</Error>");
    const d = await put(65536);
    assert.equal(d.status, 503);
    assert.equal(new TextDecoder().decode(d.body!), "<Error>Slow</Error>");
    const e = await put(65536); // over readBody: not read, the connection goes
    assert.equal(e.status, 200);
    assert.equal(e.body, null);
    const f = await put(65536);
    assert.equal(f.headers.get("x-a"), "1, 2");
    assert.equal(new TextDecoder().decode(f.body!), "ok");
    // The large body arrived whole and as sent; Host and Content-Length are the client's own.
    assert.equal(rx.seen.length, 5);
    for (const s of rx.seen) {
      assert.match(s.head, /^PUT \/hook\?x=1 HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+\r\n/);
      assert.match(s.head, /\r\nContent-Length: 3145728$/);
      assert.doesNotMatch(s.head, /Host: evil|content-length: 1\r/);
    }
    assert.deepEqual(
      rx.seen.map((s) => s.connection),
      [1, 1, 1, 1, 2],
      "sized, empty and chunked bodies read whole keep the connection",
    );
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http1_client: a body without a length is read to the close, within readBody", async () => {
  const rx = rawReceiver((_, n) => ({
    bytes: n === 1
      ? "HTTP/1.1 500 Oops\r\n\r\nplain text"
      : `HTTP/1.0 200 OK\r\n\r\n${"y".repeat(5000)}`,
    close: true,
  }));
  const c = new Http1Client();
  try {
    const a = await c.request({
      method: "GET",
      url: rx.url,
      headers: {},
      timeoutMs: 2000,
      readBody: 1024,
    });
    assert.equal(a.status, 500);
    assert.equal(new TextDecoder().decode(a.body!), "plain text");
    const b = await c.request({
      method: "GET",
      url: rx.url,
      headers: {},
      timeoutMs: 2000,
      readBody: 1024,
    });
    assert.equal(b.status, 200);
    assert.equal(b.body, null, "over readBody");
    assert.match(
      rx.seen[0].head,
      /^GET \/hook\?x=1 HTTP\/1\.1\r\nHost: [^\r]+$/,
      "no length on a bodiless GET",
    );
  } finally {
    c.close();
    await rx.stop();
  }
});
