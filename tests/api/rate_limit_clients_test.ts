// A real client meets a pull limit: skopeo (containers/image, the stack podman, buildah and
// CRI-O share) pulls from Wharf once the pull bucket is empty, and the refusal — 429
// TOOMANYREQUESTS — reaches its output. containers/image retries a 429 five times, sleeping
// Retry-After capped at 60 s, so skopeo gives up after about four minutes: this test is slow
// on purpose (docs/operations.md, "Rate limits").
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";
import { missingTools, skopeo } from "../e2e/_skopeo.ts";

const CLIENT_TIMEOUT_MS = 330_000;

Deno.test({
  name: "skopeo: a pull over the limit fails and its output says why",
  ignore: missingTools() !== null,
  ...serverTestOpts,
  async fn() {
    await withServer({ config: `[global.rate_limit]\npulls_per_hour = 1\n` }, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      const ref = `docker://127.0.0.1:${s.port}/team/app:v1`;
      const first = await skopeo(["inspect", "--raw", "--tls-verify=false", ref]);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /"schemaVersion":\s*2/, "the one pull of the hour");
      const started = Date.now();
      const second = await skopeo(
        ["--debug", "inspect", "--raw", "--tls-verify=false", ref],
        CLIENT_TIMEOUT_MS,
      );
      const secs = Math.round((Date.now() - started) / 1000);
      assert.ok(secs < CLIENT_TIMEOUT_MS / 1000 - 5, `skopeo gave up by itself (${secs} s)`);
      assert.notEqual(second.code, 0, "refused");
      // It saw the header and waited as told (capped at 60 s by containers/image).
      assert.match(second.stderr, /Detected 'Retry-After' header \\"3600\\"/);
      assert.match(
        second.stderr,
        /toomanyrequests: pull rate limit reached: 1 manifest pulls per hour for anonymous clients from 127\.0\.0\.1/,
        second.stderr.slice(-2000),
      );
      console.log(`skopeo gave up after ${secs} s: ${second.stderr.trim().split("\n").pop()}`);
    });
  },
});
