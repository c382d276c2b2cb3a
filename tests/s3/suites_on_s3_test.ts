// The API and e2e suites' core, run again with every test server's bytes in a real S3 server
// (@20minutes/s3rver on loopback): the harness reads WHARF_TEST_S3 (tests/helpers/server.ts).
// One child `deno test` runs the files unchanged, so a backend difference fails the same
// assertions the filesystem store passes.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { startS3 } from "../helpers/s3_server.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

// These assert inline GET answers (headers, ranges), so they run with redirects off; skopeo
// runs with them on and follows the presigned URLs.
const INLINE_SUITES = [
  "tests/api/oci_conformance_test.ts",
  "tests/api/uploads_test.ts",
  "tests/api/blobs_test.ts",
  "tests/api/scrub_test.ts",
  "tests/api/crash_test.ts",
  "tests/api/restart_test.ts",
  "tests/api/chaos_test.ts",
  "tests/api/pull_through_test.ts",
  // the layer index keeps its listings, checkpoints and side copies as derived objects
  "tests/api/layers_test.ts",
];
const REDIRECT_SUITES = ["tests/e2e/skopeo_test.ts"];

async function runSuites(
  endpoint: string,
  files: string[],
  noRedirect: boolean,
  replicas = 1,
): Promise<void> {
  const env: Record<string, string> = {
    WHARF_TEST_S3: endpoint,
    WHARF_STRICT_KV_LIMITS: "1",
    NO_COLOR: "1",
  };
  if (noRedirect) env.WHARF_TEST_S3_NO_REDIRECT = "1";
  if (replicas > 1) env.WHARF_TEST_REPLICAS = String(replicas);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--unstable-kv", "-A", ...files],
    cwd: ROOT,
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  const summary = /^(ok|FAILED) \| (\d+) passed.*$/m.exec(text);
  assert.equal(out.code, 0, `suites failed on S3:\n${text.slice(-20_000)}`);
  assert.ok(
    summary && Number(summary[2]) >= files.length,
    `too few tests ran:\n${text.slice(-3000)}`,
  );
}

Deno.test({
  name:
    "s3: conformance replay, uploads, blobs, scrub under load, crash, restart, pull-through, skopeo on S3; conformance and skopeo across 3 processes",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const s3 = await startS3();
    try {
      await runSuites(s3.endpoint, INLINE_SUITES, true);
      await runSuites(s3.endpoint, REDIRECT_SUITES, false);
      // Across processes: every request of the conformance replay and of skopeo's round trips
      // goes to the next of three `serve` processes on one KV file and one bucket.
      await runSuites(s3.endpoint, ["tests/api/oci_conformance_test.ts"], true, 3);
      await runSuites(s3.endpoint, ["tests/e2e/skopeo_test.ts"], false, 3);
      // The bytes really went to S3: the bucket holds blobs under the servers' prefixes.
      const found = new Deno.Command("find", {
        args: [`${s3.dir}/data/wharf`, "-path", "*/blobs/sha256/*"],
      }).outputSync();
      assert.ok(found.stdout.length > 0, "no blob was stored in the S3 bucket");
    } finally {
      await s3.close();
    }
  },
});
