// Serving the web UI (SPEC §Web UI routes): with `[ui] enabled`, GET/HEAD outside the API paths
// answer the bundle's files or its index document; hashed assets cache for a year, the index
// revalidates; the API, health and metrics paths are untouched; `ui-asset` goes through the
// access policy; with the UI off those paths stay JSON 404s. And the committed bundle in ui/dist/
// is what the sources in ui/ build to.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";

const UI_DIR = fileURLToPath(new URL("../../ui/", import.meta.url));

async function bundleFiles(dir: string, prefix = ""): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) {
      for (const [k, v] of await bundleFiles(join(dir, e.name), `${prefix}${e.name}/`)) {
        out.set(k, v);
      }
    } else out.set(`${prefix}${e.name}`, await Deno.readTextFile(join(dir, e.name)));
  }
  return out;
}

Deno.test({
  ...serverTestOpts,
  name: "ui: the bundle, its index for app paths, cache headers, API paths untouched",
  fn: () =>
    withServer({ config: '[ui]\nenabled = true\nname = "Dock 7"\n' }, async (s) => {
      const dist = await bundleFiles(join(UI_DIR, "dist"));
      const index = dist.get("index.html")!;
      for (const path of ["/", "/app", "/app/web:v1", "/jobs/cache", "/x/y@sha256:abc#history"]) {
        const r = await req(s, path);
        assert.equal(r.status, 200, path);
        assert.equal(r.headers.get("content-type"), "text/html; charset=utf-8");
        assert.equal(r.headers.get("cache-control"), "no-cache");
        assert.equal(await r.text(), index, path);
      }
      const asset = [...dist.keys()].find((k) => k.startsWith("assets/") && k.endsWith(".js"))!;
      const a = await req(s, `/${asset}`);
      assert.equal(a.status, 200);
      assert.equal(a.headers.get("content-type"), "text/javascript; charset=utf-8");
      assert.equal(a.headers.get("cache-control"), "public, max-age=31536000, immutable");
      assert.equal(await a.text(), dist.get(asset));
      // revalidation and HEAD
      const etag = a.headers.get("etag")!;
      const again = await req(s, `/${asset}`, { headers: { "if-none-match": etag } });
      assert.equal(again.status, 304);
      await again.body?.cancel();
      const head = await req(s, "/", { method: "HEAD" });
      assert.equal(head.status, 200);
      assert.equal(
        head.headers.get("content-length"),
        String(new TextEncoder().encode(index).length),
      );
      assert.equal(await head.text(), "");
      // the API, health and metrics keep their answers
      assert.deepEqual(await (await req(s, "/v2/")).json(), {});
      assert.deepEqual(await (await req(s, "/v2/_svc/ui/config")).json(), { name: "Dock 7" });
      await assertErrorCode(await req(s, "/v2/nothing/here"), 404, "NAME_UNKNOWN");
      assert.equal((await (await req(s, "/healthz")).json()).status, "ok");
      // writes to a UI path are not the UI's
      await assertErrorCode(await req(s, "/app", { method: "POST" }), 400, "UNSUPPORTED");
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "ui: off by default in a config file; ui-asset decided by the access policy",
  fn: async () => {
    await withServer({}, async (s) => {
      await assertErrorCode(await req(s, "/"), 404, "NAME_UNKNOWN");
      await assertErrorCode(await req(s, "/app"), 404, "NAME_UNKNOWN");
    });
    // With `default = "allow"`, a rule that matches denies.
    await withServer({
      config: `[ui]\nenabled = true\n[global.access_policy]\ndefault = "allow"\n` +
        `rules = ['request.action == "ui-asset"']\n`,
    }, async (s) => {
      const r = await req(s, "/");
      assert.ok(r.status === 401 || r.status === 403, String(r.status));
      await r.body?.cancel();
      assert.equal((await req(s, "/v2/")).status, 200);
    });
  },
});

Deno.test({
  name: "ui: the committed bundle in ui/dist is what ui/ builds to",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const out = await Deno.makeTempDir({ prefix: "wharf-ui-build-" });
    try {
      const r = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "npm:vite@8.3.8", "build", "--outDir", out, "--emptyOutDir"],
        cwd: UI_DIR,
        env: { NO_COLOR: "1" },
      }).output();
      assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
      assert.deepEqual(
        await bundleFiles(out),
        await bundleFiles(join(UI_DIR, "dist")),
        "ui/dist is stale: run `cd ui && deno task build` and commit ui/dist",
      );
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});

Deno.test({
  name: "ui: every file of ui/dist is committed (a fresh clone serves the same bundle)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const git = await new Deno.Command("git", {
      args: ["ls-files", "-z", "--", "dist"],
      cwd: UI_DIR,
      stdout: "piped",
      stderr: "null",
    }).output().catch(() => null);
    // Outside a git checkout (an unpacked release) there is nothing to compare against; CI
    // always runs in one.
    if (!git || git.code !== 0) {
      assert.notEqual(Deno.env.get("WHARF_REQUIRE_TOOLS"), "1", "git ls-files failed in CI");
      return;
    }
    const tracked = new Set(
      new TextDecoder().decode(git.stdout).split("\0").filter(Boolean).map((p) =>
        p.replace(/^dist\//, "")
      ),
    );
    const present = [...(await bundleFiles(join(UI_DIR, "dist"))).keys()].sort();
    assert.deepEqual(
      present.filter((p) => !tracked.has(p)),
      [],
      "files in ui/dist that git does not track: `git add ui/dist`",
    );
    assert.deepEqual([...tracked].sort(), present);
  },
});
