// Docker (CLI + daemon) against a real Wharf process: push an image (Docker's flow: HEAD each blob,
// POST, PATCH the stream, PUT, then a schema2 manifest), push it under another name (cross-repo
// mounts), pull it back by tag and by digest into an empty daemon image store, pull one platform
// of a multi-platform index, and log in through the token service while anonymous and
// wrong-password attempts are refused.
import assert from "node:assert/strict";
import { join } from "node:path";
import { req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { ALICE, startAliceOnlyServer } from "./_token_server.ts";
import { type Docker, dockerMissing, startDocker } from "./_docker.ts";
import { buildImages, type Images, missingTools, type Run, skopeoOk } from "./_skopeo.ts";

const skipReason = dockerMissing() ?? missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const opts = { ...serverTestOpts, ignore: skipReason !== null };

const SCHEMA2 = "application/vnd.docker.distribution.manifest.v2+json";

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function ok(r: Run, what: string, s?: TestServer): Run {
  if (r.code !== 0) {
    const log = s ? `\n--- server output (tail) ---\n${s.output().slice(-3000)}` : "";
    assert.fail(
      `${what} exited ${r.code}:\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-2000)}${log}`,
    );
  }
  return r;
}

/** Loads the layout's v1 into the daemon as `name` (docker load of a skopeo docker-archive). */
async function loadV1(d: Docker, name: string): Promise<void> {
  const tar = join(d.dir, "v1.tar");
  await skopeoOk(["copy", `oci:${img().layout}:v1`, `docker-archive:${tar}:${name}`]);
  ok(await d.docker(["load", "-i", tar]), "docker load");
  await Deno.remove(tar);
}

/** The manifest digest `docker push` printed ("<tag>: digest: sha256:… size: N"). */
function pushedDigest(r: Run): string {
  const m = /digest: (sha256:[0-9a-f]{64}) size: \d+/.exec(r.stdout);
  assert.ok(m, `no digest in docker push output:\n${r.stdout}`);
  return m[1];
}

Deno.test({
  name: "docker: push, cross-repo mount, pull by tag and digest, one platform of an index",
  ...opts,
  async fn(t) {
    const d = await startDocker();
    try {
      await withServer({}, async (s) => {
        const host = `127.0.0.1:${s.port}`;
        let digest = "";
        let layers: string[] = [];

        await t.step("docker push stores a schema2 image whose blobs all read back", async () => {
          await loadV1(d, `${host}/dkr/app:v1`);
          digest = pushedDigest(ok(await d.docker(["push", `${host}/dkr/app:v1`]), "push", s));
          const r = await req(s, "/v2/dkr/app/manifests/v1", { headers: { accept: SCHEMA2 } });
          const body = await r.json();
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("docker-content-digest"), digest);
          assert.equal(r.headers.get("content-type"), SCHEMA2);
          // docker recompresses the layers it loaded, so their digests are its own; the config
          // is carried byte for byte.
          assert.equal(body.config.digest, img().v1.config);
          assert.equal(body.layers.length, img().v1.layers.length);
          layers = body.layers.map((l: { digest: string }) => l.digest);
          for (const l of body.layers) {
            const b = await req(s, `/v2/dkr/app/blobs/${l.digest}`);
            const bytes = new Uint8Array(await b.arrayBuffer());
            assert.equal(b.status, 200);
            assert.equal(bytes.length, l.size);
            const hex = Array.from(
              new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)),
              (x) => x.toString(16).padStart(2, "0"),
            ).join("");
            assert.equal(`sha256:${hex}`, l.digest);
          }
        });

        await t.step("pushing it under another name mounts every layer", async () => {
          ok(await d.docker(["tag", `${host}/dkr/app:v1`, `${host}/dkr/other:v2`]), "tag");
          const r = ok(await d.docker(["push", `${host}/dkr/other:v2`]), "push other", s);
          assert.equal(pushedDigest(r), digest);
          const mounted = r.stdout.split("\n").filter((l) => /Mounted from dkr\/app/.test(l));
          assert.equal(mounted.length, layers.length, r.stdout);
        });

        await t.step("an empty image store pulls it back by tag and by digest", async () => {
          ok(await d.docker(["rmi", `${host}/dkr/app:v1`, `${host}/dkr/other:v2`]), "rmi");
          const byTag = ok(await d.docker(["pull", `${host}/dkr/app:v1`]), "pull by tag", s);
          assert.match(byTag.stdout, new RegExp(`Digest: ${digest}`));
          const id = ok(
            await d.docker(["image", "inspect", "-f", "{{.Id}}", `${host}/dkr/app:v1`]),
            "inspect",
          );
          // The image ID is the config digest: the config came back byte for byte.
          assert.equal(id.stdout.trim(), img().v1.config);
          ok(await d.docker(["rmi", `${host}/dkr/app:v1`]), "rmi");
          ok(await d.docker(["pull", `${host}/dkr/other@${digest}`]), "pull by digest", s);
          const id2 = ok(
            await d.docker(["image", "inspect", "-f", "{{.Id}}", `${host}/dkr/other@${digest}`]),
            "inspect",
          );
          assert.equal(id2.stdout.trim(), img().v1.config);
        });

        await t.step("docker pull --platform picks its manifest out of an OCI index", async () => {
          await skopeoOk([
            "copy",
            "--all",
            "--dest-tls-verify=false",
            `oci:${img().layout}:multi`,
            `docker://${host}/dkr/multi:latest`,
          ]);
          for (const [platform, arch] of [["linux/arm64", "arm64"], ["linux/amd64", "amd64"]]) {
            ok(
              await d.docker(["pull", "--platform", platform, `${host}/dkr/multi:latest`]),
              `pull ${platform}`,
              s,
            );
            const r = ok(
              await d.docker([
                "image",
                "inspect",
                "-f",
                "{{.Architecture}}",
                `${host}/dkr/multi:latest`,
              ]),
              "inspect",
            );
            assert.equal(r.stdout.trim(), arch);
          }
        });
      });
    } finally {
      await d.stop();
    }
  },
});

Deno.test({
  name: "docker: login through the token service; anonymous and wrong-password pushes are refused",
  ...opts,
  async fn(t) {
    const d = await startDocker();
    const s = await startAliceOnlyServer();
    try {
      const host = `127.0.0.1:${s.port}`;
      await loadV1(d, `${host}/team/app:v1`);

      await t.step("an anonymous push is refused and stores nothing", async () => {
        const r = await d.docker(["push", `${host}/team/app:v1`]);
        assert.notEqual(r.code, 0, r.stdout);
        assert.match(r.stdout + r.stderr, /unauthorized|authentication required|denied/i);
        const probe = await req(s, "/v2/team/app/tags/list", {
          headers: { authorization: `Basic ${btoa(`${ALICE.username}:${ALICE.password}`)}` },
        });
        assert.equal(probe.status, 404, await probe.text());
      });

      await t.step("docker login with a wrong password fails", async () => {
        const r = await d.docker(["login", "-u", "alice", "--password-stdin", host], {
          stdin: "nope\n",
        });
        assert.notEqual(r.code, 0);
        assert.match(r.stdout + r.stderr, /unauthorized|incorrect|401/i);
      });

      await t.step("after docker login alice pushes and pulls", async () => {
        ok(
          await d.docker(["login", "-u", "alice", "--password-stdin", host], {
            stdin: `${ALICE.password}\n`,
          }),
          "login",
        );
        const digest = pushedDigest(ok(await d.docker(["push", `${host}/team/app:v1`]), "push", s));
        ok(await d.docker(["rmi", `${host}/team/app:v1`]), "rmi");
        const r = ok(await d.docker(["pull", `${host}/team/app:v1`]), "pull", s);
        assert.match(r.stdout, new RegExp(`Digest: ${digest}`));
      });
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
      await d.stop();
    }
  },
});
