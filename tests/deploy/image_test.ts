// `deploy.sh image` and `deploy.sh binary`: the image is built with buildah from this machine's
// files (no network, no base image), pushed to a Wharf under test, inspected there (non-root
// user, /data volume, healthcheck on /healthz, entrypoint), then pulled back, unpacked and its
// entrypoint run as the image's user in a chroot: the server starts from the image's files
// alone, answers /healthz, the healthcheck command passes and /data is writable. The binary
// target needs the Deno runtime download (or DENORT_BIN), so only its command line is checked.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serverTestOpts } from "../helpers/api.ts";
import { pushBlob, withServer } from "../helpers/server.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

async function sh(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const o = await new Deno.Command(cmd, { args, cwd: ROOT, env }).output();
  const dec = new TextDecoder();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
}

Deno.test({
  name: "deploy.sh binary: deno compile per target with the UI embedded (command line only)",
  ...serverTestOpts,
  async fn() {
    const r = await sh("bash", [
      "deploy.sh",
      "binary",
      "--dry-run",
      "--target",
      "x86_64-unknown-linux-gnu",
      "--target",
      "x86_64-pc-windows-msvc",
    ], { DENORT_BIN: "/opt/denort" });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n").filter((l) => l.startsWith("deno compile"));
    assert.deepEqual(lines, [
      "deno compile --unstable-kv --allow-net --allow-read --allow-write --allow-env --allow-sys --allow-ffi --v8-flags=--max-semi-space-size=4 --include ui/dist --target x86_64-unknown-linux-gnu --output dist/wharf-x86_64-unknown-linux-gnu main.ts",
      "deno compile --unstable-kv --allow-net --allow-read --allow-write --allow-env --allow-sys --allow-ffi --v8-flags=--max-semi-space-size=4 --include ui/dist --target x86_64-pc-windows-msvc --output dist/wharf-x86_64-pc-windows-msvc.exe main.ts",
    ]);
    assert.match(r.stdout, /DENORT_BIN=\/opt\/denort/);
    const all = await sh("bash", ["deploy.sh", "binary", "--dry-run"]);
    assert.equal(all.stdout.split("\n").filter((l) => l.startsWith("deno compile")).length, 5);
    for (const t of ["aarch64-unknown-linux-gnu", "x86_64-apple-darwin", "aarch64-apple-darwin"]) {
      assert.match(all.stdout, new RegExp(`--target ${t} --output dist/wharf-${t} main\\.ts`));
    }
    const bad = await sh("bash", ["deploy.sh", "binary", "--dry-run", "--target", "x86_64-musl"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown target/);
  },
});

Deno.test({
  name: "deploy.sh image: buildah image from host files, pushed, inspected, and its entrypoint run",
  ...serverTestOpts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "wharf-image-" });
    // buildah's image store stays in the temp dir: nothing of the host's is read or written.
    const storage = join(dir, "storage.conf");
    await Deno.writeTextFile(
      storage,
      `[storage]\ndriver = "vfs"\ngraphroot = "${dir}/graph"\nrunroot = "${dir}/run"\n`,
    );
    const env = { CONTAINERS_STORAGE_CONF: storage, TMPDIR: dir };
    const rootfs = join(dir, "rootfs");
    let mounted = false;
    let child: Deno.ChildProcess | null = null;
    try {
      await withServer({}, async (s) => {
        const ref = `127.0.0.1:${s.port}/wharf/server:ci`;
        const b = await sh("bash", [
          "deploy.sh",
          "image",
          "--tag",
          "localhost/wharf-ci:test",
          "--push",
          `docker://${ref}`,
          "--tls-verify=false",
        ], env);
        assert.equal(b.code, 0, `${b.stdout}\n${b.stderr}`);
        const cfg = await sh("skopeo", [
          "inspect",
          "--tls-verify=false",
          "--config",
          "--raw",
          `docker://${ref}`,
        ]);
        assert.equal(cfg.code, 0, cfg.stderr);
        const c = JSON.parse(cfg.stdout).config;
        assert.equal(c.User, "10001:10001");
        assert.deepEqual(Object.keys(c.Volumes), ["/data"]);
        assert.deepEqual(Object.keys(c.ExposedPorts), ["5000/tcp"]);
        assert.deepEqual(c.Cmd, ["serve", "-c", "/etc/wharf/wharf.toml"]);
        assert.equal(c.Entrypoint.at(-1), "/app/main.ts");
        assert.ok(c.Entrypoint.includes("--cached-only"));
        assert.deepEqual(c.Healthcheck.Test, [
          "CMD",
          "/usr/local/bin/deno",
          "run",
          "--cached-only",
          "--allow-net",
          "--allow-env",
          "/app/healthcheck.js",
        ]);
        assert.equal(c.Healthcheck.Interval, 30e9);
        const raw = await sh("skopeo", [
          "inspect",
          "--tls-verify=false",
          "--raw",
          `docker://${ref}`,
        ]);
        assert.equal(
          JSON.parse(raw.stdout).mediaType,
          "application/vnd.docker.distribution.manifest.v2+json",
        );

        // Pull it back and run the entrypoint from the image's files only.
        const oci = join(dir, "oci");
        const cp = await sh("skopeo", [
          "copy",
          "--src-tls-verify=false",
          `docker://${ref}`,
          `oci:${oci}:x`,
        ]);
        assert.equal(cp.code, 0, cp.stderr);
        const index = JSON.parse(await Deno.readTextFile(join(oci, "index.json")));
        const man = JSON.parse(
          await Deno.readTextFile(join(oci, "blobs", ...index.manifests[0].digest.split(":"))),
        );
        await Deno.mkdir(rootfs);
        for (const l of man.layers) {
          const x = await sh("tar", [
            "-xf",
            join(oci, "blobs", ...l.digest.split(":")),
            "-C",
            rootfs,
          ]);
          assert.equal(x.code, 0, x.stderr);
        }
        const st = await Deno.stat(join(rootfs, "data"));
        assert.equal(st.uid, 10001, "/data belongs to the image's user");
        // glibc from the host, as deno links it
        assert.ok((await sh("ls", [join(rootfs, "lib64")])).stdout.includes("ld-linux"));
        const port = 20000 + Math.floor(Math.random() * 20000);
        await Deno.writeTextFile(
          join(rootfs, "etc/wharf/test.toml"),
          `[server]\nport = ${port}\nbind_address = "127.0.0.1"\n`,
        );
        await Deno.mkdir(join(rootfs, "proc"), { recursive: true });
        // deno reads its stack bounds from /proc, which a container runtime would mount.
        assert.equal((await sh("mount", ["--bind", "/proc", join(rootfs, "proc")])).code, 0);
        mounted = true;
        child = new Deno.Command("chroot", {
          args: [
            "--userspec=10001:10001",
            rootfs,
            ...c.Entrypoint,
            ...c.Cmd,
            "-c",
            "/etc/wharf/test.toml",
          ],
          env: { DENO_DIR: "/opt/deno", HOME: "/data", NO_COLOR: "1" },
          clearEnv: true,
          cwd: rootfs,
          stdout: "piped",
          stderr: "piped",
        }).spawn();
        const url = `http://127.0.0.1:${port}`;
        const deadline = Date.now() + 60_000;
        for (;;) {
          const ok = await fetch(`${url}/healthz`).then((r) => {
            r.body?.cancel();
            return r.ok;
          }, () => false);
          if (ok) break;
          assert.ok(Date.now() < deadline, "the image's server never answered /healthz");
          await new Promise((r) => setTimeout(r, 250));
        }
        const hco = await new Deno.Command("chroot", {
          args: ["--userspec=10001:10001", rootfs, ...c.Healthcheck.Test.slice(1)],
          env: { DENO_DIR: "/opt/deno", WHARF_PORT: String(port) },
          clearEnv: true,
        }).output();
        const hc = { code: hco.code, stderr: new TextDecoder().decode(hco.stderr) };
        assert.equal(hc.code, 0, `healthcheck: ${hc.stderr}`);
        // /data is writable: a push lands there.
        await pushBlob(url, "img/test", new TextEncoder().encode("in the volume"));
        const blobs = await sh("find", [join(rootfs, "data", "blobs", "blobs"), "-type", "f"]);
        assert.equal(blobs.stdout.trim().split("\n").length, 1);
      });
    } finally {
      if (child) {
        try {
          (child as Deno.ChildProcess).kill("SIGKILL");
        } catch { /* gone */ }
        await (child as Deno.ChildProcess).output().catch(() => {});
      }
      if (mounted) await sh("umount", [join(rootfs, "proc")]);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
