// A real client meets a rate limit: skopeo (containers/image, the stack podman, buildah and
// CRI-O share) asks Wharf for an image while another client from the same address keeps the
// anonymous request bucket empty, and the refusal — 429 TOOMANYREQUESTS with Retry-After —
// reaches its output. containers/image retries a 429 five times, sleeping what Retry-After
// says (capped at 60 s): with one request per second that is a few seconds, where a pull
// limit's Retry-After of an hour makes it wait four minutes (docs/operations.md, "Rate limits").
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";
import { missingTools, skopeo } from "../e2e/_skopeo.ts";

const CLIENT_TIMEOUT_MS = 120_000;

Deno.test({
  name: "skopeo: a request over the limit fails and its output says why",
  ignore: missingTools() !== null,
  ...serverTestOpts,
  async fn() {
    // Only GETs past the version check are limited: the test pushes the image first, and
    // containers/image reports a refused ping as "too many requests to registry" only.
    const config = `[global.rate_limit]
requests_per_second = 1
burst = 1
sync_interval_ms = 100
exempt_rules = ['request.method != "GET" || request.action == "get-api-version"']
`;
    await withServer({ config }, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      const ref = `docker://127.0.0.1:${s.port}/team/app:v1`;
      // Other clients from 127.0.0.1 take each token the moment it comes: skopeo, told to wait
      // the whole seconds until the next one, always arrives after it was taken.
      let hammering = true;
      const hammer = Promise.all([0, 1].map(async () => {
        while (hammering) {
          await (await fetch(`${s.url}/v2/team/app/tags/list`)).body?.cancel();
        }
      }));
      try {
        const started = Date.now();
        const second = await skopeo(
          ["--debug", "inspect", "--raw", "--tls-verify=false", ref],
          CLIENT_TIMEOUT_MS,
        );
        const secs = Math.round((Date.now() - started) / 1000);
        assert.notEqual(second.code, 0, "refused");
        // It saw the header and waited as told.
        assert.match(second.stderr, /Detected 'Retry-After' header \\"1\\"/);
        assert.match(
          second.stderr,
          /request rate limit reached: 1 requests per second \(burst 1\) for anonymous clients from 127\.0\.0\.1/,
          second.stderr.slice(-2000),
        );
        console.log(`skopeo gave up after ${secs} s: ${second.stderr.trim().split("\n").pop()}`);
      } finally {
        hammering = false;
        await hammer;
      }
    });
  },
});
