// containerd (ctr, the docker resolver containerd and nerdctl share) against a real Wharf process:
// push an image, a multi-platform index and an artifact with a subject from the make-images.sh
// layout, pull them back into an empty namespace (unpacking v1, which checks every layer against
// the config's diff IDs), pull by digest, and push and pull with credentials through the token
// service while an anonymous push is refused.
import assert from "node:assert/strict";
import { join } from "node:path";
import { req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { ALICE, startAliceOnlyServer } from "./_token_server.ts";
import { type Containerd, containerdMissing, startContainerd } from "./_containerd.ts";
import {
  assertPullMatchesLayout,
  buildImages,
  type Images,
  layoutDigests,
  missingTools,
  type Run,
} from "./_skopeo.ts";

// make-images.sh comes with the skopeo tooling; containerd's own check runs regardless, so
// WHARF_REQUIRE_TOOLS=1 names every missing piece.
const skipReason = containerdMissing() ?? missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const opts = { ...serverTestOpts, ignore: skipReason !== null };

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function ok<R extends Run>(r: R, what: string, s?: TestServer): R {
  if (r.code !== 0) {
    const log = s ? `\n--- server output (tail) ---\n${s.output().slice(-3000)}` : "";
    assert.fail(`${what} exited ${r.code}:\n${r.stderr.slice(-3000)}${log}`);
  }
  return r;
}

/** The layout as an OCI archive, which `ctr images import` takes. */
async function layoutTar(): Promise<string> {
  const tar = join(img().dir, "oci.tar");
  const out = await new Deno.Command("tar", {
    args: ["-cf", tar, "-C", img().layout, "."],
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return tar;
}

/** Imports the layout's refs as `<base>:<ref>` into containerd namespace `ns`, without unpacking. */
async function importLayout(c: Containerd, ns: string, base: string) {
  ok(
    await c.ctr(ns, [
      "images",
      "import",
      "--all-platforms",
      "--no-unpack",
      "--base-name",
      base,
      await layoutTar(),
    ]),
    "ctr images import",
  );
}

/** name -> digest of the images containerd namespace `ns` holds. */
async function imageDigests(c: Containerd, ns: string): Promise<Record<string, string>> {
  const r = ok(await c.ctr(ns, ["images", "ls"]), "ctr images ls");
  const out: Record<string, string> = {};
  for (const line of r.stdout.trim().split("\n").slice(1)) {
    const [name, , digest] = line.split(/\s+/);
    out[name] = digest;
  }
  return out;
}

async function contentDigests(c: Containerd, ns: string): Promise<Set<string>> {
  const r = ok(await c.ctr(ns, ["content", "ls", "-q"]), "ctr content ls");
  return new Set(r.stdout.trim().split("\n").filter(Boolean));
}

Deno.test({
  name: "containerd: push and pull an image, an index and an artifact",
  ...opts,
  async fn(t) {
    const c = await startContainerd();
    try {
      await withServer({}, async (s) => {
        const base = `127.0.0.1:${s.port}/ctr/app`;
        const { v1, multi, sbom, layout } = img();
        await importLayout(c, "src", base);

        await t.step("ctr pushes v1, multi (every platform) and sbom", async () => {
          for (const ref of ["v1", "multi", "sbom"]) {
            ok(
              await c.ctr("src", ["images", "push", "--plain-http", `${base}:${ref}`]),
              `push ${ref}`,
              s,
            );
          }
          const tags = await (await req(s, "/v2/ctr/app/tags/list")).json();
          assert.deepEqual(tags.tags, ["multi", "sbom", "v1"]);
          await assertPullMatchesLayout(s, "ctr/app", "v1", layout, v1.digest);
          await assertPullMatchesLayout(s, "ctr/app", "multi", layout, multi.digest);
          await assertPullMatchesLayout(s, "ctr/app", "sbom", layout, sbom.digest);
          const refs = await (await req(s, `/v2/ctr/app/referrers/${v1.digest}`)).json();
          assert.deepEqual(refs.manifests.map((m: { digest: string }) => m.digest), [sbom.digest]);
        });

        await t.step("ctr pulls them into an empty namespace with the same digests", async () => {
          ok(
            await c.ctr("dst", [
              "images",
              "pull",
              "--plain-http",
              "--snapshotter",
              "native",
              `${base}:v1`,
            ]),
            "pull v1 (unpacked)",
            s,
          );
          ok(
            await c.ctr("dst", [
              "content",
              "fetch",
              "--plain-http",
              "--all-platforms",
              `${base}:multi`,
            ]),
            "fetch multi",
            s,
          );
          const got = await contentDigests(c, "dst");
          for (
            const d of [v1.digest, v1.config, ...v1.layers, multi.digest, multi.amd64, multi.arm64]
          ) {
            assert.ok(got.has(d), `containerd lacks ${d} after the pull`);
          }
          const named = await imageDigests(c, "dst");
          assert.equal(named[`${base}:v1`], v1.digest);
        });

        await t.step("ctr pulls by digest", async () => {
          ok(
            await c.ctr("bydigest", [
              "content",
              "fetch",
              "--plain-http",
              "--all-platforms",
              `${base}@${multi.digest}`,
            ]),
            "fetch multi by digest",
            s,
          );
          const got = await contentDigests(c, "bydigest");
          for (const d of [multi.digest, multi.amd64, multi.arm64]) assert.ok(got.has(d), d);
        });

        await t.step("every blob containerd fetched is byte-identical to the layout", async () => {
          const all = new Set(await layoutDigests(layout));
          for (const d of await contentDigests(c, "dst")) {
            assert.ok(all.has(d), `containerd holds ${d}, which the layout does not`);
            const r = ok(await c.ctr("dst", ["content", "get", d]), `content get ${d}`);
            const want = await Deno.readFile(join(layout, "blobs", ...d.split(":")));
            assert.deepEqual(r.raw, want, `bytes of ${d}`);
          }
        });
      });
    } finally {
      await c.stop();
    }
  },
});

Deno.test({
  name: "containerd: --user goes through the token service; anonymous pushes are refused",
  ...opts,
  async fn(t) {
    const c = await startContainerd();
    const s = await startAliceOnlyServer();
    try {
      const base = `127.0.0.1:${s.port}/team/app`;
      await importLayout(c, "src", base);

      await t.step("an anonymous push fails and stores nothing", async () => {
        const r = await c.ctr("src", ["images", "push", "--plain-http", `${base}:v1`]);
        assert.notEqual(r.code, 0, "anonymous push succeeded");
        assert.match(r.stderr, /401|unauthorized|authorization/i);
        const probe = await req(s, "/v2/team/app/tags/list", {
          headers: { authorization: `Basic ${btoa(`${ALICE.username}:${ALICE.password}`)}` },
        });
        assert.equal(probe.status, 404, await probe.text());
      });

      await t.step("alice pushes and pulls with --user", async () => {
        ok(
          await c.ctr("src", [
            "images",
            "push",
            "--plain-http",
            "--user",
            `${ALICE.username}:${ALICE.password}`,
            `${base}:v1`,
          ]),
          "push as alice",
          s,
        );
        ok(
          await c.ctr("dst", [
            "content",
            "fetch",
            "--plain-http",
            "--user",
            `${ALICE.username}:${ALICE.password}`,
            `${base}:v1`,
          ]),
          "fetch as alice",
          s,
        );
        const got = await contentDigests(c, "dst");
        for (const d of [img().v1.digest, img().v1.config, ...img().v1.layers]) {
          assert.ok(got.has(d), d);
        }
      });

      await t.step("a wrong password is refused", async () => {
        const r = await c.ctr("bad", [
          "content",
          "fetch",
          "--plain-http",
          "--user",
          "alice:nope",
          `${base}:v1`,
        ]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /401|unauthorized/i);
      });
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
      await c.stop();
    }
  },
});
