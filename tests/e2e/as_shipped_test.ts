// Wharf as the README ships it, verbatim, on a fresh clone of the repository's HEAD, offline: a
// private network namespace holds only a loopback, and the server, skopeo and Chromium all run
// in it. `deno task start` with no config file (0.0.0.0:5000, ./data of the clone, the web UI on,
// advisory downloads from osv.dev that must fail offline without harm), a skopeo push of a
// Debian-like image, its layer listed, its packages found with no advisory data to check them
// against (and the report says so), and its Filesystem page in Chromium naming its files. Then
// `deno task worker -c wharf.toml` beside `deno task start -c wharf.toml -c serve.toml` on one KV,
// the server leaving the index queue to the worker: the worker's index job lists the layer.
//
// Both start their processes as a user does (the tasks of the clone's deno.json, its permission
// set "wharf"; npm packages from the machine's Deno cache, as after one online run), not through
// tests/helpers/server.ts: what they prove is that the shipped commands start their sandbox
// children (the layer walk, the package parse), which a test launcher granting more would hide.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM } from "./_browser.ts";
import {
  assertDebianListing,
  assertDebianReport,
  type DebianLayout,
  writeDebianLayout,
} from "./_debian_layout.ts";
import {
  chromiumIn,
  type Netns,
  netnsMissingTools,
  type NsProcess,
  openNetns,
  pollJson,
} from "./_netns.ts";
import { isFile, missingReason, runs } from "./_tools.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

const skipReason = missingReason(
  "as shipped",
  [
    ...netnsMissingTools(),
    ...(runs("git", ["--version"]) ? [] : ["git"]),
    ...(runs("skopeo", ["--version"]) ? [] : ["skopeo"]),
    ...(isFile(CHROMIUM) ? [] : ["chromium"]),
  ],
  "apt-get install util-linux iproute2 curl git skopeo chromium",
);
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

const URL_5000 = "http://localhost:5000";

/** The environment a user's shell would hand the commands: the test suite's own knobs removed. */
function userEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!k.startsWith("WHARF_") && k !== "FUZZ_RUNS" && k !== "FUZZ_SEED") env[k] = v;
  }
  return { ...env, NO_COLOR: "1" };
}

async function sh(cmd: string, args: string[], cwd: string): Promise<string> {
  const o = await new Deno.Command(cmd, {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  const dec = new TextDecoder();
  assert.equal(o.code, 0, `${cmd} ${args.join(" ")}: ${dec.decode(o.stderr)}`);
  return dec.decode(o.stdout);
}

/** A fresh clone of the project's HEAD in `dir`/wharf: no data/, ui/dist as committed. */
async function freshClone(dir: string): Promise<string> {
  const clone = join(dir, "wharf");
  await sh("git", ["clone", "--quiet", "--no-hardlinks", ROOT, clone], dir);
  await assert.rejects(Deno.stat(join(clone, "data")), "a fresh clone has no data/");
  // `deno task start` serves ui/dist, which the repository commits (README, Tour): no build step.
  assert.ok(isFile(join(clone, "ui", "dist", "index.html")), "ui/dist is not in the clone");
  return clone;
}

const entriesUrl = (l: DebianLayout) => `${URL_5000}/v2/demo/app/_svc/layers/${l.layer}/entries`;
const reportUrl = (l: DebianLayout) => `${URL_5000}/v2/demo/app/_svc/vulnerabilities/${l.manifest}`;

/** The literal push of the README's Quick start, from an OCI layout, in the namespace. */
async function skopeoPush(ns: Netns, layout: string, tag: string, ref: string, log: () => string) {
  const r = await ns.run(
    ["skopeo", "copy", "--dest-tls-verify=false", `oci:${layout}:${tag}`, `docker://${ref}`],
    { timeoutMs: 60_000 },
  );
  assert.equal(r.code, 0, `skopeo copy: ${r.stderr}\n--- server ---\n${log().slice(-3000)}`);
}

async function withClone(
  prefix: string,
  fn: (dir: string, clone: string, ns: Netns) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix });
  let ns: Netns | null = null;
  try {
    const clone = await freshClone(dir);
    ns = await openNetns();
    // offline: nothing but the loopback
    const out = await ns.run(["curl", "-sS", "--max-time", "5", "https://osv.dev/"]);
    assert.notEqual(out.code, 0, "the namespace reaches the network");
    await fn(dir, clone, ns);
  } finally {
    await ns?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Ctrl+C: the server or worker stops cleanly with the README's last line. */
async function ctrlC(p: NsProcess, last: RegExp): Promise<void> {
  const st = await p.stop(20_000);
  assert.match(p.output(), last, `no ${last} after Ctrl+C:\n${p.output().slice(-3000)}`);
  assert.ok(st.signal === null || st.signal === "SIGINT", `stopped by ${st.signal}`);
}

Deno.test({
  ...base,
  name:
    "as shipped: the README on a fresh clone, offline: deno task start, a skopeo push, its layer listed, its packages found (not checked), its Filesystem page in Chromium",
  fn: () =>
    withClone("wharf-as-shipped-", async (dir, clone, ns) => {
      const layout = await writeDebianLayout(join(dir, "layout"), "1");
      const server = ns.spawn(["deno", "task", "start"], {
        cwd: clone,
        env: userEnv(),
        clearEnv: true,
      });
      const log = server.output;
      // The startup line of the README: the address, ./data, the UI, the sandbox it proved.
      const up = await server.waitFor(/wharf listening on .*\n/, 90_000);
      const line = /wharf listening on .*/.exec(up)![0];
      assert.match(line, /^wharf listening on http:\/\/0\.0\.0\.0:5000 /);
      assert.match(line, /blobs \.\/data\/blobs; metadata \.\/data\/metadata\.kv/);
      assert.match(line, /sandbox process/);
      assert.match(line, /web UI on at \//);
      const health = await ns.http(`${URL_5000}/healthz`);
      assert.equal(health.status, 200, health.body);

      await skopeoPush(ns, layout.dir, "1", "localhost:5000/demo/app:1", log);
      const man = await ns.http(`${URL_5000}/v2/demo/app/manifests/1`, {
        headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
      });
      assert.equal(man.status, 200, man.body);
      assert.equal(man.headers["docker-content-digest"], layout.manifest);

      // The layer walk runs in a sandbox child: listed means the child started and parsed.
      assertDebianListing(await pollJson(ns, entriesUrl(layout), 60_000, log));
      // The report: the package parse runs in a sandbox child too. Offline, no advisory data.
      assertDebianReport(await pollJson(ns, reportUrl(layout), 60_000, log), layout);

      // Its Filesystem page, from Chromium inside the namespace.
      const exe = await chromiumIn(ns, dir, CHROMIUM);
      const browser = await chromium.launch({
        executablePath: exe,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        timeout: 60_000,
      });
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        page.on("response", (r) => {
          if (r.status() >= 500) errors.push(`${r.status()} ${r.url()}`);
        });
        const TAB = "section[data-tab=filesystem]";
        await page.goto(`${URL_5000}/demo/app:1#filesystem`);
        await page.waitForFunction(
          ([sel, want]) => {
            const got = Array.from(
              document.querySelectorAll(sel),
              (e) => (e as HTMLElement).dataset.path,
            );
            return want.every((p) => got.includes(p));
          },
          [`${TAB} [role=treeitem]`, ["etc", "usr", "var"]] as [string, string[]],
          { timeout: 30_000 },
        );
        // A file opened by its deep link: the pane names it and shows its text.
        await page.goto(`${URL_5000}/demo/app:1#filesystem/etc/os-release`);
        await page.waitForSelector(`${TAB} .fs-pane[data-path="etc/os-release"]`, {
          timeout: 30_000,
        });
        await page.waitForSelector(`${TAB} .fs-code .fs-line`, { timeout: 30_000 });
        const text = await page.textContent(`${TAB} .fs-code`);
        assert.match(text ?? "", /Debian GNU\/Linux 12 \(bookworm\)/);
        await page.goto(`${URL_5000}/demo/app:1#filesystem/var/lib/dpkg/status`);
        await page.waitForSelector(`${TAB} .fs-pane[data-path="var/lib/dpkg/status"]`, {
          timeout: 30_000,
        });
        await page.waitForFunction(
          (sel) => /Package: libc6/.test(document.querySelector(sel)?.textContent ?? ""),
          `${TAB} .fs-code`,
          { timeout: 30_000 },
        );
        assert.deepEqual(errors, [], "the page failed");
      } finally {
        await browser.close();
      }

      // The download of the image's advisories (Debian) from osv.dev failed offline, and the
      // server carries on serving.
      // One warn line names the cause and the next attempt (issue 37), not a retry per failure.
      await server.waitFor(
        /"level":"warn","msg":"advisory download failed: Debian: [^\n]*next attempt at /,
        30_000,
      );
      assert.equal((await ns.http(`${URL_5000}/healthz`)).status, 200);
      await ctrlC(server, /wharf stopped\s*$/);
      // The README's ./data, in the clone.
      assert.ok(isFile(join(clone, "data", "metadata.kv")), "no ./data/metadata.kv");
      assert.ok((await Deno.stat(join(clone, "data", "blobs"))).isDirectory);
    }),
});

Deno.test({
  ...base,
  name:
    "as shipped: deno task worker beside deno task start on one KV drains the index queue the server leaves to it",
  fn: () =>
    withClone("wharf-as-shipped-worker-", async (dir, clone, ns) => {
      const layout = await writeDebianLayout(join(dir, "layout"), "1");
      // One KV and blob store for both; the server's own file leaves the index queue to workers
      // (docs/operations.md, "Processes": concurrency.<queue> = 0 on the servers).
      await Deno.writeTextFile(
        join(clone, "wharf.toml"),
        `[server]
bind_address = "127.0.0.1"
port = 5000

[blob_store.fs]
root_dir = "./data/blobs"

[metadata_store]
path = "./data/metadata.kv"

[global.job_queue]
poll_interval_ms = 200
`,
      );
      await Deno.writeTextFile(
        join(clone, "serve.toml"),
        `[global.job_queue]\nconcurrency.index = 0\n`,
      );
      const env = userEnv();
      const server = ns.spawn(["deno", "task", "start", "-c", "wharf.toml", "-c", "serve.toml"], {
        cwd: clone,
        env,
        clearEnv: true,
      });
      await server.waitFor(/wharf listening on http:\/\/127\.0\.0\.1:5000 /, 90_000);
      await skopeoPush(ns, layout.dir, "1", "localhost:5000/demo/app:1", server.output);

      // No process drains the index queue yet: the layer stays 202 over many polls.
      const until = Date.now() + 2_000;
      while (Date.now() < until) {
        const r = await ns.http(entriesUrl(layout));
        assert.equal(r.status, 202, `indexed without a worker: ${r.status} ${r.body}`);
        await new Promise((r) => setTimeout(r, 250));
      }

      const worker = ns.spawn(["deno", "task", "worker", "-c", "wharf.toml"], {
        cwd: clone,
        env,
        clearEnv: true,
      });
      const both = () => `${server.output()}\n--- worker ---\n${worker.output()}`;
      const started = await worker.waitFor(/wharf worker draining .*\n/, 90_000);
      assert.match(started, /wharf worker draining [^\n]*\bindex \(1 at a time\)/);
      assert.match(started, /sandbox process/);
      assertDebianListing(await pollJson(ns, entriesUrl(layout), 60_000, both));
      await ctrlC(worker, /wharf worker stopped\s*$/);
      await ctrlC(server, /wharf stopped\s*$/);
    }),
});
