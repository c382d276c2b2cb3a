// The web UI's actions and states in chromium against a real Wharf: the two-click delete (arm,
// disarm by clicking elsewhere, execute) and the index cascade checked through the API; deleting a
// tag; the jobs views with jobs in each state (pending, failed), retry, delete, load more and
// auto-refresh; the 404, 401 and 500 states; and the first five minutes (no config file: the UI is
// on at `/`).
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { req } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import {
  distinctManifest,
  imageIndex,
  jsonBytes,
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  putManifestOk,
  unique,
} from "../helpers/oci_content.ts";
import { sha256 } from "../helpers/bytes.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = {
  ignore: browserSkipReason !== null,
  sanitizeOps: false,
  sanitizeResources: false,
};
async function status(s: TestServer, ns: string, ref: string): Promise<number> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    method: "HEAD",
    headers: { accept: `${OCI_MANIFEST}, ${OCI_INDEX}` },
  });
  await r.body?.cancel();
  return r.status;
}

async function referrer(
  s: TestServer,
  ns: string,
  subject: { digest: string; size: number; mediaType: string },
) {
  const body = jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    artifactType: "application/vnd.example.sig",
    config: {
      mediaType: OCI_EMPTY,
      digest: await sha256(jsonBytes({})),
      size: 2,
    },
    layers: [{
      mediaType: OCI_EMPTY,
      digest: await sha256(jsonBytes({})),
      size: 2,
    }],
    subject,
  });
  const digest = await sha256(body);
  await putManifestOk(s, ns, digest, body);
  return digest;
}

/** The button's armed state once it shows `want` (it re-renders after the event), or its last. */
async function armedState(
  page: Page,
  selector: string,
  want = "true",
): Promise<string | null> {
  await page.waitForSelector(`${selector}[data-armed=${want}]`, {
    timeout: 5_000,
  }).catch(() => {});
  return await page.getAttribute(selector, "data-armed");
}

Deno.test({
  ...base,
  name: "ui in chromium: two-click delete, the index cascade and tag delete, checked by the API",
  fn: () =>
    withServer({ config: "[ui]\nenabled = true\n" }, async (s) => {
      const ns = "team/multi";
      const amd = await distinctManifest("amd64");
      const arm = await distinctManifest("arm64");
      await putManifestOk(s, ns, amd.digest, amd.body);
      await putManifestOk(s, ns, arm.digest, arm.body);
      await putManifestOk(s, ns, "keep", amd.body); // the amd64 image carries a tag: it stays
      const index = imageIndex([
        {
          mediaType: OCI_MANIFEST,
          digest: amd.digest,
          size: amd.body.length,
          platform: { os: "linux", architecture: "amd64" },
        },
        {
          mediaType: OCI_MANIFEST,
          digest: arm.digest,
          size: arm.body.length,
          platform: { os: "linux", architecture: "arm64", variant: "v8" },
        },
      ]);
      const indexDigest = await sha256(index);
      await putManifestOk(s, ns, "multi", index, OCI_INDEX);
      const sigOfIndex = await referrer(s, ns, {
        mediaType: OCI_INDEX,
        digest: indexDigest,
        size: index.length,
      });
      const sigOfArm = await referrer(s, ns, {
        mediaType: OCI_MANIFEST,
        digest: arm.digest,
        size: arm.body.length,
      });
      const sigOfSig = await referrer(s, ns, {
        mediaType: OCI_MANIFEST,
        digest: sigOfArm,
        size: 0,
      });
      // a second index naming the arm64 image keeps it... in another namespace it does not count
      const other = await distinctManifest("unrelated");
      await putManifestOk(s, ns, "other", other.body);

      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/${ns}:multi`);
        const del = "button.delete:not(:has-text('tag'))";
        await page.waitForSelector(del);
        // the first click arms (red), a click elsewhere disarms, Escape too
        await page.click(del);
        assert.equal(await armedState(page, del), "true");
        assert.match((await page.textContent(del))!, /Click again/);
        await page.click("h1");
        assert.equal(await armedState(page, del, "false"), "false");
        await page.click(del);
        await page.keyboard.press("Escape");
        assert.equal(await armedState(page, del, "false"), "false");
        assert.equal(
          await status(s, ns, indexDigest),
          200,
          "nothing deleted by arming",
        );
        await assertAccessible(page, "details of an index");
        // arm and execute
        await page.click(del);
        await screenshot(page, "delete-armed-light");
        await page.click(del);
        await page.waitForURL(`${s.url}/${ns}`);
        await page.waitForSelector("tr[data-digest]");
        // the index, its untagged arm64 image and every referrer of what went are gone...
        for (
          const d of [indexDigest, arm.digest, sigOfIndex, sigOfArm, sigOfSig]
        ) {
          assert.equal(await status(s, ns, d), 404, `${d} should be deleted`);
        }
        // ...the tagged amd64 image and the unrelated one stay
        assert.equal(await status(s, ns, amd.digest), 200);
        assert.equal(await status(s, ns, "keep"), 200);
        assert.equal(await status(s, ns, other.digest), 200);
        assert.deepEqual(
          (await page.$$eval("tr[data-digest]", (t) => t.map((e) => e.getAttribute("data-digest"))))
            .sort(),
          [amd.digest, other.digest].sort(),
        );

        // a tag's own delete removes the tag, not the manifest
        await page.goto(`${s.url}/${ns}:other`);
        await page.click("button.delete:has-text('tag')");
        await page.click("button.delete:has-text('tag')");
        await page.waitForURL(`${s.url}/${ns}`);
        assert.equal(await status(s, ns, "other"), 404);
        assert.equal(await status(s, ns, other.digest), 200);
      } finally {
        await browser.close();
      }
    }),
});

Deno.test({
  ...base,
  name: "ui in chromium: deleting an immutable tag shows the server's reason, and the tag stays",
  fn: () =>
    withServer({
      config: "[ui]\nenabled = true\n[global]\nimmutable_tags = true\n",
    }, async (s) => {
      const ns = "team/frozen";
      const img = await distinctManifest("frozen");
      await putManifestOk(s, ns, "v1", img.body);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/${ns}:v1`);
        await page.click("button.delete:has-text('tag')");
        await page.click("button.delete:has-text('tag')");
        const notice = page.locator("p.notice[role=status]");
        await notice.waitFor();
        // the 409's detail names the tag and why, not only "denied"
        assert.match(await notice.innerText(), /Delete failed: .*v1.*immutable/i);
        assert.equal(await status(s, ns, "v1"), 200);
      } finally {
        await browser.close();
      }
    }),
});

function startWorker(configPath: string): Deno.ChildProcess {
  return wharfCommand(["worker", "--queue", "cache", "-c", configPath], {
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
  }).spawn();
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function jobs(
  s: TestServer,
  set: "list" | "failed",
): Promise<{ storage_key: string; attempts: number }[]> {
  const r = await req(s, `/v2/_svc/jobs/${set}?queue=cache&n=1000`);
  const b = await r.json();
  return set === "list" ? b.jobs : b.failed;
}

Deno.test({
  ...base,
  name: "ui in chromium: jobs views with pending and failed jobs, retry, delete, load more",
  fn: async () => {
    const up = await FakeRegistry.start();
    try {
      const config = `
[ui]
enabled = true
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 200
max_attempts = 2
[global.job_queue.concurrency]
cache = 0
[[repository."hub".upstream]]
url = "${up.url}"
connect_timeout_secs = 2
read_timeout_secs = 5
`;
      await withServer({ config }, async (s) => {
        const queue = async (n: number) => {
          for (let i = 0; i < n; i++) {
            const d = up.addBlob("library/app", unique(`blob ${i}`));
            const r = await req(s, `/v2/hub/library/app/blobs/${d}`, {
              headers: { Range: "bytes=0-3" },
            });
            assert.equal(r.status, 206);
            await r.body?.cancel();
          }
        };
        // 3 fills dead-lettered by a worker whose upstream answers other bytes...
        await queue(3);
        up.fault({ method: "GET", path: "/blobs/" }, { replaceBody: "poison" });
        const workerCfg = join(s.dataDir, "worker.toml");
        await Deno.writeTextFile(
          workerCfg,
          (await Deno.readTextFile(s.configPath)).replace(
            "cache = 0",
            "cache = 2",
          ),
        );
        const w = startWorker(workerCfg);
        try {
          await until(
            "3 failed jobs",
            async () => (await jobs(s, "failed")).length === 3,
          );
        } finally {
          w.kill("SIGTERM");
          await w.output();
        }
        up.clearFaults();
        // ...and 105 pending ones (more than a page)
        await queue(105);
        assert.equal((await jobs(s, "list")).length, 105);

        const browser = await launch();
        try {
          const page = await browser.newPage();
          await page.goto(`${s.url}/jobs`);
          await page.waitForSelector("table[data-jobs=pending] tr[data-job]");
          await page.waitForSelector("table[data-jobs=failed] tr[data-job]");
          assert.equal(await page.textContent("h1"), "Jobs: cache");
          assert.equal(
            await page.locator("table[data-jobs=pending] tr[data-job]").count(),
            100,
          );
          await page.click("button:has-text('Load more')");
          await until(
            "105 rows",
            async () =>
              await page.locator("table[data-jobs=pending] tr[data-job]")
                .count() === 105,
          );
          const failedRows = page.locator(
            "table[data-jobs=failed] tr[data-job]",
          );
          assert.equal(await failedRows.count(), 3);
          assert.match((await failedRows.first().textContent())!, /fill-blob/);
          assert.match(
            (await failedRows.first().textContent())!,
            /hash|digest/i,
          );
          await assertAccessible(page, "jobs");
          await screenshot(page, "jobs-light");
          // retry moves a failed job back to pending (the view refreshes itself)
          await failedRows.first().locator("button:has-text('Retry')").click();
          await until(
            "2 failed",
            async () => (await jobs(s, "failed")).length === 2,
          );
          assert.equal((await jobs(s, "list")).length, 106);
          await until(
            "the view shows 2 failed",
            async () => await failedRows.count() === 2,
          );
          // delete needs two clicks, on a failed and on a pending job
          const delFailed = failedRows.first().locator("button.delete");
          await delFailed.click();
          assert.equal((await jobs(s, "failed")).length, 2, "armed only");
          await delFailed.click();
          await until(
            "1 failed",
            async () => (await jobs(s, "failed")).length === 1,
          );
          const delPending = page.locator(
            "table[data-jobs=pending] tr[data-job] button.delete",
          )
            .first();
          await delPending.click();
          await delPending.click();
          await until(
            "105 pending",
            async () => (await jobs(s, "list")).length === 105,
          );
          // auto-refresh picks up jobs queued behind the view's back
          await queue(1);
          await until(
            "the new job on screen",
            async () =>
              await page.locator("table[data-jobs=pending] tr[data-job]")
                .count() === 106,
          );
          // the other queues and an unknown one
          await page.click("nav[aria-label='Job queues'] a:has-text('scan')");
          await page.waitForSelector("text=No pending jobs in the scan queue.");
          assert.equal(new URL(page.url()).pathname, "/_jobs/scan");
          await page.goto(`${s.url}/_jobs/nonesuch`);
          await page.waitForSelector("text=There is no job queue named");
        } finally {
          await browser.close();
        }
      });
    } finally {
      await up.close();
    }
  },
});

Deno.test({
  ...base,
  name: "ui in chromium: 404, 401 and 500 states, retry after a 500",
  fn: () =>
    withServer({
      config: `[ui]\nenabled = true\n[global.access_policy]\ndefault = "deny"\nrules = [
  'request.action in ["ui-asset", "ui-config", "list-repositories", "list-namespaces"]',
  'request.namespace.startsWith("open/")',
]\n`,
    }, async (s) => {
      await putManifestOk(
        s,
        "open/app",
        "v1",
        (await distinctManifest("open")).body,
      );
      const browser = await launch();
      try {
        const page = await browser.newPage();
        // no such manifest: 404
        await page.goto(`${s.url}/open/app:nope`);
        await page.waitForSelector("[role=alert][data-status='404']");
        assert.match((await page.textContent("[role=alert]"))!, /Not found/);
        await assertAccessible(page, "404 state");
        // refused to an anonymous caller: 401, and no sign-in is configured (no browser dialog)
        await page.goto(`${s.url}/closed/app:v1`);
        await page.waitForSelector("[role=alert][data-status='401']");
        assert.match(
          (await page.textContent("[role=alert]"))!,
          /no sign-in configured/,
        );
        // a 500 from the server is shown with a retry that works once the server answers again
        let fail = true;
        await page.route("**/v2/_svc/repositories/list", (route) =>
          fail
            ? route.fulfill({
              status: 500,
              contentType: "application/json",
              body: JSON.stringify({
                errors: [{ code: "UNKNOWN", message: "boom", detail: "" }],
              }),
            })
            : route.continue());
        await page.goto(`${s.url}/`);
        await page.waitForSelector("[role=alert] button:has-text('Retry')");
        assert.match((await page.textContent("[role=alert]"))!, /boom/);
        fail = false;
        await page.click("[role=alert] button:has-text('Retry')");
        await page.waitForSelector("tr[data-repository=open]");
      } finally {
        await browser.close();
      }
    }),
});

Deno.test({
  ...base,
  name: "ui in chromium: with no config file the UI is on at / and says so at startup",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-noconf-" });
    // the README's run command: no config file, so 0.0.0.0:5000 and ./data under the cwd
    const port = 5000;
    const p = wharfCommand(["serve"], {
      cwd: dir,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    try {
      await until("the server", async () => {
        try {
          const r = await fetch(`http://127.0.0.1:${port}/healthz`);
          await r.body?.cancel();
          return r.ok;
        } catch {
          return false;
        }
      });
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`http://127.0.0.1:${port}/`);
        await page.waitForSelector("text=No repositories yet");
        assert.equal(await page.textContent("header .brand"), "Wharf");
      } finally {
        await browser.close();
      }
    } finally {
      p.kill("SIGTERM");
      const out = await p.output();
      const text = new TextDecoder().decode(out.stdout) +
        new TextDecoder().decode(out.stderr);
      assert.match(text, /web UI on at \//);
      assert.match(text, /press Ctrl\+C to stop/);
      assert.match(text, /wharf stopping/);
      assert.match(text, /wharf stopped/);
      await Deno.remove(dir, { recursive: true });
    }
  },
});
