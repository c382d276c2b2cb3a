// Verified before visible, everywhere images enter (issue 34 item 4): a pull-through cache
// fetches the upstream's cosign signature with the image, verifies it before serving the fill
// and keeps it beside the image; a scheduled sync brings the signature first; replication sends
// a released image's signature before its tag, so a downstream never sees it unsigned. The
// upstreams and downstreams here are real Wharf processes.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { cosignSignature, makeKey, pushSignature, verifyToml } from "../helpers/cosign.ts";
import {
  descOf,
  distinctManifest,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  putManifest,
} from "../helpers/oci_content.ts";
import { sha256 } from "../helpers/bytes.ts";
import { pushBlob, runCli, startServer, type TestServer, withServer } from "../helpers/server.ts";

const UP = "team/app";

async function until(what: string, f: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** An image whose config blob is pushed too (a sync fetches every blob). */
async function wholeImage(s: TestServer, label: string) {
  const cfg = jsonBytes({ os: "linux", architecture: "amd64", label, n: crypto.randomUUID() });
  await pushBlob(s.url, UP, cfg);
  const body = imageManifest(await descOf(OCI_CONFIG, cfg), []);
  return { body, digest: await sha256(body) };
}

/** An upstream Wharf holding a signed image (tag `signed`) and an unsigned one (`plain`). */
async function upstreamWithImages(s: TestServer, key: Awaited<ReturnType<typeof makeKey>>) {
  const signed = await wholeImage(s, "upstream signed");
  const plain = await wholeImage(s, "upstream plain");
  assert.equal((await putManifest(s, UP, "signed", signed.body)).status, 201);
  assert.equal((await putManifest(s, UP, "plain", plain.body)).status, 201);
  const sig = await cosignSignature(key, `upstream/${UP}`, signed.digest);
  assert.equal((await pushSignature(s, UP, sig)).status, 201);
  return { signed, plain, sig };
}

Deno.test(
  "verify pull-through: the upstream's signature is fetched, checked and cached",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({}, async (up) => {
      const { signed, plain, sig } = await upstreamWithImages(up, key);
      const config = `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${up.url}"\n` +
        verifyToml("hub", "enforce", { ci: key });
      await withServer({ config }, async (s) => {
        const ok = await req(s, `/v2/hub/${UP}/manifests/signed`);
        assert.equal(ok.status, 200, await ok.clone().text());
        assert.equal(ok.headers.get("docker-content-digest"), signed.digest);
        assert.equal(ok.headers.get("warning"), null);
        await ok.body?.cancel();
        const st = await (await req(s, `/v2/hub/${UP}/_svc/signatures/signed`)).json();
        assert.equal(st.verified, true);
        assert.equal(st.signers[0].signer, "key:ci");
        assert.equal(st.signers[0].artifact, sig.digest);
        // Cached beside the image: listed here, served with the upstream gone.
        const tags = await (await req(s, `/v2/hub/${UP}/tags/list`)).json();
        assert.ok(tags.tags.includes(sig.tag), JSON.stringify(tags));

        const no = await req(s, `/v2/hub/${UP}/manifests/plain`);
        const e = await assertErrorCode(no, 403, "DENIED");
        assert.match(
          String(e.detail),
          new RegExp(`no signature by a trusted key for ${plain.digest}`),
        );
        const byDigest = await req(s, `/v2/hub/${UP}/manifests/${plain.digest}`);
        assert.equal(byDigest.status, 403);
        await byDigest.body?.cancel();

        await up.stop();
        const cached = await req(s, `/v2/hub/${UP}/manifests/${sig.digest}`);
        assert.equal(cached.status, 200, "the signature is cached");
        await cached.body?.cancel();
        const again = await req(s, `/v2/hub/${UP}/manifests/${signed.digest}`);
        assert.equal(again.status, 200, "the verified image is served from the cache");
        await again.body?.cancel();
      });
    });
  },
);

Deno.test(
  "verify sync: a scheduled sync brings the signature before the tag",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({}, async (up) => {
      const { signed, plain, sig } = await upstreamWithImages(up, key);
      const config = `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${up.url}"\n` +
        verifyToml("hub", "enforce", { ci: key });
      const s = await startServer({ config });
      try {
        const path = join(s.dataDir, "with-sync.toml");
        await Deno.writeTextFile(
          path,
          (await Deno.readTextFile(s.configPath)) +
            `[[repository."hub".sync]]\nnamespaces = ["${UP}"]\ntags = ["signed", "plain"]\n`,
        );
        const run = await runCli({ ...s, configPath: path }, "sync");
        assert.equal(run.code, 0, run.stdout + run.stderr);
        // The sync stored and judged both: with the upstream gone, the signed one is served.
        await up.stop();
        const ok = await req(s, `/v2/hub/${UP}/manifests/signed`);
        assert.equal(ok.status, 200, await ok.clone().text());
        assert.equal(ok.headers.get("docker-content-digest"), signed.digest);
        await ok.body?.cancel();
        const st = await (await req(s, `/v2/hub/${UP}/_svc/signatures/signed`)).json();
        assert.equal(st.verified, true);
        assert.equal(st.signers[0].artifact, sig.digest);
        const no = await req(s, `/v2/hub/${UP}/manifests/${plain.digest}`);
        await assertErrorCode(no, 403, "DENIED");
      } finally {
        await s.stop();
      }
    });
  },
);

const FAST = `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 100
backoff_max_ms = 1000
`;

Deno.test(
  "verify replication: a released image reaches the downstream with its signature first",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    // The downstream warns on anything unsigned: had the image landed before its signature, its
    // first pull there would carry the Warning.
    await withServer({ config: FAST + verifyToml("app", "warn", { ci: key }) }, async (b) => {
      const config = FAST + verifyToml("app", "enforce", { ci: key }) +
        `\n[[repository."app".downstream]]\nname = "b"\nurl = "${b.url}"\n`;
      await withServer({ config }, async (a) => {
        const image = await distinctManifest("replicated");
        assert.equal((await putManifest(a, "app/x", "v1", image.body)).status, 201);
        // Held at the source: nothing goes to the downstream.
        await new Promise((r) => setTimeout(r, 500));
        const none = await req(b, `/v2/app/x/manifests/${image.digest}`);
        assert.equal(none.status, 404, "a held image is not replicated");
        await none.body?.cancel();
        const sig = await cosignSignature(key, "a/app/x", image.digest);
        assert.equal((await pushSignature(a, "app/x", sig)).status, 201);
        let first: Response | null = null;
        await until("the tag downstream", async () => {
          const r = await req(b, `/v2/app/x/manifests/v1`);
          if (r.status === 200) {
            first = r;
            return true;
          }
          await r.body?.cancel();
          return false;
        });
        const r = first! as Response;
        assert.equal(r.headers.get("docker-content-digest"), image.digest);
        assert.equal(r.headers.get("warning"), null, "never seen unsigned downstream");
        await r.body?.cancel();
        const st = await (await req(b, `/v2/app/x/_svc/signatures/v1`)).json();
        assert.equal(st.verified, true);
        assert.equal(st.signers[0].artifact, sig.digest);
      });
    });
  },
);
