// Presigned redirects (SPEC §Blobs Redirects, §Manifests rule 1) against a Wharf whose bytes are
// in a real S3 server: 307 to a URL S3 itself serves (followed by curl and fetch, ranges
// included), X-Svc-No-Redirect, HEAD never redirected, the switches, the manifest's media type
// kept by response-content-type, and S3's own signature check on the URL.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { startS3, type TestS3 } from "../helpers/s3_server.ts";
import { pushBlob, pushImage, s3Toml, type TestServer, withServer } from "../helpers/server.ts";

const enc = new TextEncoder();

function blob(n: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * 17 + (i >> 9)) & 0xff);
}

async function withS3Server(
  config: string,
  fn: (s: TestServer, s3: TestS3) => Promise<void>,
): Promise<void> {
  const s3 = await startS3();
  try {
    await withServer(
      { blobStore: s3Toml(s3.endpoint, "redirects"), config },
      (s) => fn(s, s3),
    );
  } finally {
    await s3.close();
  }
}

async function curl(args: string[]): Promise<{ code: number; out: Uint8Array; err: string }> {
  const o = await new Deno.Command("curl", { args: ["-sS", ...args] }).output();
  return { code: o.code, out: o.stdout, err: new TextDecoder().decode(o.stderr) };
}

Deno.test({
  name: "s3 redirects: blob GET is a 307 to S3 that curl and fetch follow, ranges included",
  ...serverTestOpts,
  async fn() {
    await withS3Server("", async (s, s3) => {
      const data = blob(3 << 20);
      const d = await pushBlob(s.url, "r/blob", data);
      const url = `${s.url}/v2/r/blob/blobs/${d}`;
      const r = await fetch(url, { redirect: "manual" });
      await r.body?.cancel();
      assert.equal(r.status, 307);
      const loc = r.headers.get("location")!;
      assert.ok(loc.startsWith(`${s3.endpoint}/wharf/redirects/blobs/sha256/`), loc);
      assert.match(loc, /X-Amz-Signature=[0-9a-f]{64}/);
      assert.match(loc, /X-Amz-Expires=900/);
      assert.equal(r.headers.get("docker-content-digest"), d);
      // curl -L follows it to S3 and gets the exact bytes.
      const whole = await curl(["-L", "--fail", url]);
      assert.equal(whole.code, 0, whole.err);
      assert.deepEqual(whole.out, data);
      // A Range goes along to S3, which answers it.
      const part = await curl(["-L", "--fail", "-r", "1000-1999", url]);
      assert.deepEqual(part.out, data.subarray(1000, 2000));
      const followed = await fetch(url, { headers: { range: "bytes=-10" } });
      assert.equal(followed.status, 206);
      assert.deepEqual(
        new Uint8Array(await followed.arrayBuffer()),
        data.subarray(data.length - 10),
      );
      // S3 checks the signature: a tampered URL is refused there.
      // (its first hex digit changed, to one it is not: "0" when it was "0" left it valid)
      const bad = await fetch(
        loc.replace(
          /X-Amz-Signature=([0-9a-f])/,
          (_, c) => `X-Amz-Signature=${c === "0" ? "1" : "0"}`,
        ),
      );
      await bad.body?.cancel();
      assert.equal(bad.status, 403);
      // HEAD never redirects.
      const head = await fetch(url, { method: "HEAD", redirect: "manual" });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get("content-length"), String(data.length));
      // An unsatisfiable range is still answered here (416), not sent to S3.
      const r416 = await fetch(url, {
        headers: { range: `bytes=${data.length}-` },
        redirect: "manual",
      });
      await r416.body?.cancel();
      assert.equal(r416.status, 416);
      // Unknown blobs are 404 here, not a redirect to a missing object.
      const unknown = await fetch(`${s.url}/v2/r/blob/blobs/sha256:${"0".repeat(64)}`, {
        redirect: "manual",
      });
      await unknown.body?.cancel();
      assert.equal(unknown.status, 404);
    });
  },
});

Deno.test({
  name: "s3 redirects: X-Svc-No-Redirect forces an inline body unless empty, 0 or false",
  ...serverTestOpts,
  async fn() {
    await withS3Server("", async (s) => {
      const data = enc.encode("inline please");
      const d = await pushBlob(s.url, "r/nr", data);
      const url = `${s.url}/v2/r/nr/blobs/${d}`;
      for (
        const [value, status] of [
          ["1", 200],
          ["true", 200],
          ["yes", 200],
          ["0", 307],
          ["false", 307],
          ["FALSE", 307],
          ["", 307],
        ] as const
      ) {
        const r = await fetch(url, { redirect: "manual", headers: { "x-svc-no-redirect": value } });
        const body = new Uint8Array(await r.arrayBuffer());
        assert.equal(r.status, status, `X-Svc-No-Redirect: ${JSON.stringify(value)}`);
        if (status === 200) {
          assert.deepEqual(body, data);
          assert.equal(r.headers.get("docker-content-digest"), d);
        }
      }
    });
  },
});

Deno.test({
  name: "s3 redirects: a large manifest is a 307 keeping its media type; small ones stay inline",
  ...serverTestOpts,
  async fn() {
    await withS3Server("", async (s) => {
      // Over 48 KiB, the body lives in the blob store (smaller ones inline in KV).
      const big = await pushImage(s.url, "r/man", "big", {
        extra: { annotations: { pad: "x".repeat(60_000) } },
      });
      const url = `${s.url}/v2/r/man/manifests/big`;
      const r = await fetch(url, { redirect: "manual" });
      await r.body?.cancel();
      assert.equal(r.status, 307);
      assert.equal(r.headers.get("docker-content-digest"), big.digest);
      assert.match(
        r.headers.get("location")!,
        /response-content-type=application%2Fvnd\.oci\.image\.manifest\.v1%2Bjson/,
      );
      const followed = await fetch(url);
      assert.equal(followed.status, 200);
      assert.equal(
        followed.headers.get("content-type"),
        "application/vnd.oci.image.manifest.v1+json",
      );
      assert.deepEqual(new Uint8Array(await followed.arrayBuffer()), big.body);
      const viaCurl = await curl(["-L", "--fail", "-D", "-", "-o", "/dev/null", url]);
      assert.match(
        new TextDecoder().decode(viaCurl.out),
        /content-type: application\/vnd\.oci\.image\.manifest\.v1\+json/i,
      );
      // HEAD and X-Svc-No-Redirect answer here.
      const head = await fetch(url, { method: "HEAD", redirect: "manual" });
      assert.equal(head.status, 200);
      const inline = await fetch(url, {
        redirect: "manual",
        headers: { "x-svc-no-redirect": "1" },
      });
      assert.equal(inline.status, 200);
      assert.deepEqual(new Uint8Array(await inline.arrayBuffer()), big.body);
      const small = await pushImage(s.url, "r/man", "small");
      const sr = await fetch(`${s.url}/v2/r/man/manifests/small`, { redirect: "manual" });
      assert.equal(sr.status, 200);
      assert.deepEqual(new Uint8Array(await sr.arrayBuffer()), small.body);
    });
  },
});

Deno.test({
  name: "s3 redirects: enable_blob_redirect / enable_manifest_redirect = false serve inline",
  ...serverTestOpts,
  async fn() {
    await withS3Server(
      "[global]\nenable_blob_redirect = false\nenable_manifest_redirect = false\n",
      async (s) => {
        const big = await pushImage(s.url, "r/off", "big", {
          extra: { annotations: { pad: "y".repeat(60_000) } },
        });
        const m = await fetch(`${s.url}/v2/r/off/manifests/big`, { redirect: "manual" });
        assert.equal(m.status, 200);
        assert.deepEqual(new Uint8Array(await m.arrayBuffer()), big.body);
        const b = await fetch(`${s.url}/v2/r/off/blobs/${big.layer}`, { redirect: "manual" });
        assert.equal(b.status, 200);
        await b.body?.cancel();
      },
    );
  },
});

Deno.test({
  name: "redirects: a filesystem store has no presigned URLs, so GETs stay inline",
  ...serverTestOpts,
  async fn() {
    await withServer({}, async (s) => {
      const d = await pushBlob(s.url, "r/fs", enc.encode("fs bytes"));
      const r = await fetch(`${s.url}/v2/r/fs/blobs/${d}`, { redirect: "manual" });
      assert.equal(r.status, 200);
      assert.equal(await r.text(), "fs bytes");
    });
  },
});
