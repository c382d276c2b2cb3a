// Malformed upstream answers through the pull-through cache (issue: "Bad input"): a bad
// WWW-Authenticate, a token endpoint answering HTML, a redirect loop, a truncated body and a
// wrong Content-Length each end in a clear error (never a 500), store nothing, and leave a job
// that is retried (transient) or dead-lettered (permanent). A missing ca_bundle stops startup.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { assertErrorCode, bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

function config(up: FakeRegistry, creds = ""): string {
  return `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
max_attempts = 3

[[repository."hub".upstream]]
url = "${up.url}"
connect_timeout_secs = 2
read_timeout_secs = 2
${creds}
`;
}

async function failedJobs(s: TestServer): Promise<Record<string, unknown>[]> {
  return (await (await req(s, "/v2/_svc/jobs/failed")).json()).failed;
}

async function pendingJobs(s: TestServer): Promise<Record<string, unknown>[]> {
  return (await (await req(s, "/v2/_svc/jobs/list")).json()).jobs;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A 502/503 PROVIDER_UNAVAILABLE naming `what` in its detail. */
async function providerError(r: Response, status: number, what: RegExp): Promise<void> {
  const e = await assertErrorCode(r, status, "PROVIDER_UNAVAILABLE");
  assert.match(String(e.detail), what);
}

Deno.test("pull-through: malformed auth answers are clear 502s", serverTestOpts, async (t) => {
  const up = await FakeRegistry.start({
    auth: { scheme: "bearer", username: "u", password: "p", anonymous: false },
  });
  try {
    const cfg = jsonBytes({ os: "linux" });
    up.addBlob("app", cfg);
    up.addManifest("app", imageManifest(await descOf(OCI_CONFIG, cfg), []), { tags: ["v1"] });
    // Without a config it is no image manifest: refused as unusable, never stored.
    up.addManifest("app", jsonBytes({ schemaVersion: 2, mediaType: OCI_MANIFEST, layers: [] }), {
      tags: ["broken"],
    });
    await withServer({ config: config(up, 'username = "u"\npassword = "p"') }, async (s) => {
      await t.step("a malformed WWW-Authenticate", async () => {
        up.options.challengeOverride = 'Bearer realm="unterminated';
        await providerError(
          await req(s, "/v2/hub/app/manifests/v1"),
          502,
          /challenge|WWW-Authenticate/i,
        );
        up.options.challengeOverride = undefined;
      });
      await t.step("a token endpoint answering HTML", async () => {
        up.options.auth = { scheme: "bearer", username: "u", password: "p", tokenBody: "html" };
        await providerError(await req(s, "/v2/hub/app/manifests/v1"), 502, /token/i);
      });
      await t.step("wrong credentials: the upstream's refusal, not a 500", async () => {
        up.options.auth = { scheme: "bearer", username: "u", password: "other", anonymous: false };
        await providerError(await req(s, "/v2/hub/app/manifests/v1"), 502, /401|denied|refused/i);
      });
      await t.step("the honest upstream again works", async () => {
        up.options.auth = { scheme: "bearer", username: "u", password: "p", anonymous: false };
        const r = await req(s, "/v2/hub/app/manifests/v1");
        assert.equal(r.status, 200, await r.text());
        await providerError(await req(s, "/v2/hub/app/manifests/broken"), 502, /unusable manifest/);
        const tags = await (await req(s, "/v2/hub/app/tags/list")).json();
        assert.deepEqual(tags.tags, ["v1"]);
      });
    });
  } finally {
    await up.close();
  }
});

Deno.test(
  "pull-through: redirect loops, truncated bodies and wrong lengths store nothing",
  serverTestOpts,
  async (t) => {
    const up = await FakeRegistry.start();
    try {
      await withServer({ config: config(up) }, async (s) => {
        await t.step("a redirect loop on a blob: 502, nothing stored", async () => {
          const d = up.addBlob("app", unique("looped"));
          up.options.blobRedirect = "loop";
          await providerError(await req(s, `/v2/hub/app/blobs/${d}`), 502, /redirect/i);
          up.options.blobRedirect = "none";
          const r = await req(s, `/v2/hub/app/blobs/${d}`);
          assert.equal(r.status, 200, "nothing poisoned: the next pull fills");
          await r.body?.cancel();
        });
        await t.step(
          "a truncated body: the client's transfer breaks, the job retries and fills",
          async () => {
            const bytes = unique("truncated ".repeat(20_000));
            const d = up.addBlob("app", bytes);
            up.fault({ method: "GET", path: d, times: 1 }, { truncateAfter: 1000 });
            const r = await req(s, `/v2/hub/app/blobs/${d}`);
            const got = await bytesOf(r).catch(() => null);
            assert.ok(
              r.status !== 200 || got === null || got.length < bytes.length,
              "no complete body",
            );
            // The job (expedited when the fill failed) fetches it again: the fault was one-shot.
            await until("the job to fill the blob", async () => {
              up.resetLog();
              const h = await req(s, `/v2/hub/app/blobs/${d}`, { method: "HEAD" });
              await h.body?.cancel();
              return h.status === 200 && up.requests.length === 0;
            });
            const again = await req(s, `/v2/hub/app/blobs/${d}`);
            assert.deepEqual(await bytesOf(again), bytes);
            assert.deepEqual(await failedJobs(s), []);
          },
        );
        await t.step("a Content-Length larger than the body: never stored", async () => {
          const bytes = unique("short ".repeat(5000));
          const d = up.addBlob("app", bytes);
          up.fault({ method: "GET", path: d }, { contentLength: bytes.length + 100 });
          const r = await req(s, `/v2/hub/app/blobs/${d}`);
          const got = await bytesOf(r).catch(() => null);
          assert.ok(got === null || got.length !== bytes.length + 100);
          await until(
            "the job to give up",
            async () => (await failedJobs(s)).some((j) => String(j.lock_key).endsWith(d)),
            30_000,
          );
          const f = (await failedJobs(s)).find((j) => String(j.lock_key).endsWith(d))!;
          assert.equal(f.attempts, 3, "transient: retried up to max_attempts");
          up.clearFaults();
          up.fault({ path: /./ }, { status: 503 });
          await providerError(await req(s, `/v2/hub/app/blobs/${d}`), 503, /503/);
          up.clearFaults();
          assert.deepEqual(await pendingJobs(s), []);
        });
        await t.step("a manifest body over max_manifest_size is refused, not stored", async () => {
          const huge = jsonBytes({
            schemaVersion: 2,
            mediaType: OCI_MANIFEST,
            layers: [],
            annotations: { pad: "x".repeat(5 * 1024 * 1024) },
          });
          up.addManifest("app", huge, { tags: ["huge"] });
          const r = await req(s, "/v2/hub/app/manifests/huge");
          assert.ok(r.status === 502 || r.status === 413, `status ${r.status}`);
          await r.body?.cancel();
        });
      });
      const text = await Deno.readTextFile(join(ROOT, "deno.json"));
      assert.ok(text.length > 0);
    } finally {
      await up.close();
    }
  },
);

Deno.test("pull-through: an unreadable ca_bundle stops startup with the key and file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cfg = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      cfg,
      `[server]
port = 0
bind_address = "127.0.0.1"
[metadata_store]
path = "${join(dir, "m.kv")}"
[blob_store.fs]
root_dir = "${join(dir, "b")}"
[[repository."hub".upstream]]
url = "https://127.0.0.1:1"
ca_bundle = "${join(dir, "missing.pem")}"
`,
    );
    for (const cmd of ["serve", "worker"]) {
      const out = await wharfCommand([cmd, "-c", cfg], {
        stdout: "piped",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 2, err);
      assert.match(err, /ca_bundle/);
      assert.match(err, /missing\.pem/);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
