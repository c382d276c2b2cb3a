// Issue 26 part 1 with real clients: skopeo pushes into a repository with a quota until it is
// refused (the quota message reaches skopeo's output), the image is deleted, scrub releases its
// blobs and the push then fits; podman's push past a quota prints the same message.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { buildImages, type Images, missingTools, skopeo, skopeoOk } from "./_skopeo.ts";
import { makePodman, podmanMissing } from "./_podman.ts";

const skipReason = missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

const docker = (s: TestServer, ref: string) => `docker://127.0.0.1:${s.port}/${ref}`;
const oci = (ref: string) => `oci:${images!.layout}:${ref}`;

function push(s: TestServer, ref: string, dest: string) {
  return skopeo(["copy", "--dest-tls-verify=false", "--all", oci(ref), docker(s, dest)]);
}

async function used(s: TestServer, repo: string): Promise<number> {
  const r = await req(s, "/v2/_svc/repositories/list");
  const body = await r.json() as { repositories: { name: string; used_bytes: number }[] };
  return body.repositories.find((x) => x.name === repo)?.used_bytes ?? 0;
}

/** What each image and both together take, measured on a server with a huge default quota. */
async function measure(): Promise<{ v1: number; multi: number; both: number }> {
  let out = { v1: 0, multi: 0, both: 0 };
  await withServer({ config: `[global.quota]\ndefault_max_bytes = 1000000000000\n` }, async (s) => {
    for (const [ref, dest] of [["v1", "m1/x:v1"], ["multi", "m2/x:multi"]]) {
      const r = await push(s, ref, dest);
      assert.equal(r.code, 0, r.stderr);
    }
    for (const ref of ["v1", "multi"]) {
      const r = await push(s, ref, `m3/x:${ref}`);
      assert.equal(r.code, 0, r.stderr);
    }
    out = { v1: await used(s, "m1"), multi: await used(s, "m2"), both: await used(s, "m3") };
  });
  return out;
}

Deno.test({
  ...base,
  name: "quota + skopeo: refused past the quota with the message, delete, scrub, push again",
  fn: async () => {
    const size = await measure();
    const quota = Math.max(size.v1, size.multi) + 64;
    assert.ok(size.both > quota, `the two images together exceed one: ${JSON.stringify(size)}`);
    const config =
      `[global.scrub]\ngrace_secs = 0\n[repository."team".quota]\nmax_bytes = ${quota}\n`;
    await withServer({ config }, async (s) => {
      await skopeoOk(
        ["copy", "--dest-tls-verify=false", oci("v1"), docker(s, "team/app:v1")],
        s,
      );
      assert.equal(await used(s, "team"), size.v1);

      const refused = await push(s, "multi", "team/app:multi");
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /quota exceeded: team uses [\d.]+ (B|KiB|MiB) of/);
      assert.ok(await used(s, "team") <= quota);

      await skopeoOk(["delete", "--tls-verify=false", docker(s, "team/app:v1")], s);
      const sc = await runCli(s, "scrub");
      assert.equal(sc.code, 0, sc.stderr);
      assert.match(sc.stdout + sc.stderr, /\(0 drifted by 0 bytes\)/);

      const again = await push(s, "multi", "team/app:multi");
      assert.equal(again.code, 0, again.stderr + s.output().slice(-2000));
      assert.ok(await used(s, "team") <= quota);
    });
  },
});

const podmanSkip = skipReason ?? podmanMissing();

Deno.test({
  ...base,
  ignore: podmanSkip !== null,
  name: "quota + podman: a push past the quota fails with the quota message",
  fn: async () => {
    const pm = await makePodman();
    try {
      const config = `[repository."tiny".quota]\nmax_bytes = 1000\n`;
      await withServer({ config }, async (s) => {
        const host = `127.0.0.1:${s.port}`;
        await skopeoOk(
          ["copy", "--dest-tls-verify=false", oci("v1"), docker(s, "free/app:v1")],
          s,
        );
        const pull = await pm.run(["pull", "--tls-verify=false", `${host}/free/app:v1`]);
        assert.equal(pull.code, 0, pull.stderr);
        const tag = await pm.run(["tag", `${host}/free/app:v1`, `${host}/tiny/app:v1`]);
        assert.equal(tag.code, 0, tag.stderr);
        const r = await pm.run(["push", "--tls-verify=false", `${host}/tiny/app:v1`]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /quota exceeded: tiny uses \d+ B of 1000 B/);
      });
    } finally {
      await pm.cleanup();
    }
  },
});
