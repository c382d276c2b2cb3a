// `deploy.sh image` and `deploy.sh binary`. The image is built with buildah from a fresh clone of
// the repository's HEAD (what CI and a release build: a working tree's uncommitted or untracked
// files would make another image) inside a private network namespace, so offline as
// docs/deploy.md promises; written as a docker-archive, pushed to a Wharf under test and inspected
// there (non-root user, /data volume, healthcheck on /healthz, entrypoint with the permission
// set); then a private Docker daemon in the same namespace (its port 5000 clashes with nothing)
// loads it and runs it with its default command. There the container serves as its user, its
// healthcheck passes, a skopeo push lands in the /data volume, and the pushed image's layer is
// listed and its packages reported: both parses run in sandbox children, so the children start
// inside the container as the non-root user. The binary target needs the Deno runtime download
// (or DENORT_BIN), so only its command line is checked.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";
import { type Docker, dockerMissing, startDocker } from "../e2e/_docker.ts";
import {
  assertDebianListing,
  assertDebianReport,
  writeDebianLayout,
} from "../e2e/_debian_layout.ts";
import { type Netns, netnsMissingTools, openNetns, pollJson } from "../e2e/_netns.ts";
import { missingReason, runs } from "../e2e/_tools.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

const imageSkip = missingReason(
  "deploy.sh image",
  [
    ...(runs("buildah", ["--version"]) ? [] : ["buildah"]),
    ...(runs("skopeo", ["--version"]) ? [] : ["skopeo"]),
    ...(runs("git", ["--version"]) ? [] : ["git"]),
    ...netnsMissingTools(),
  ],
  "apt-get install buildah skopeo git util-linux iproute2 curl",
);
// Checked only where the image itself can be built.
const dockerSkip = imageSkip ?? dockerMissing();

async function sh(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const o = await new Deno.Command(cmd, {
    args,
    cwd: opts.cwd ?? ROOT,
    env: opts.env,
    stdin: "null",
    signal: AbortSignal.timeout(opts.timeoutMs ?? 120_000),
  }).output();
  const dec = new TextDecoder();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
}

/** What deploy.sh binary must --include: every sandbox child module and the decoder worker. */
async function childModules(): Promise<string[]> {
  const out = ["lib/index/checkpoint_worker.ts"];
  for await (const d of Deno.readDir(join(ROOT, "lib"))) {
    if (!d.isDirectory) continue;
    for await (const f of Deno.readDir(join(ROOT, "lib", d.name))) {
      if (f.isFile && f.name.endsWith("_child.ts")) out.push(`lib/${d.name}/${f.name}`);
    }
  }
  return out.sort();
}

Deno.test({
  name: "deploy.sh binary: deno compile per target, the permission set, the UI and the children",
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
    ], { env: { DENORT_BIN: "/opt/denort" } });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n").filter((l) => l.startsWith("deno compile"));
    assert.equal(lines.length, 2, r.stdout);
    // The V8 flags of `deno task start`, as deploy.sh reads them from deno.json.
    const start: string = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json"))).tasks.start;
    const v8 = /--v8-flags=(\S+)/.exec(start)![1];
    const children = await childModules();
    for (const [i, t] of ["x86_64-unknown-linux-gnu", "x86_64-pc-windows-msvc"].entries()) {
      const words = lines[i].split(" ");
      // a binary's sandbox child is the binary itself: run access beside the permission set
      assert.deepEqual(words.slice(0, 4), ["deno", "compile", "-P=wharf", "--allow-run"]);
      assert.ok(!words.includes("-A") && !words.includes("--allow-all"), lines[i]);
      assert.equal(words[4].replaceAll("\\,", ","), `--v8-flags=${v8}`);
      const includes = words.flatMap((w, j) => words[j - 1] === "--include" ? [w] : []);
      assert.deepEqual(includes.sort(), ["ui/dist", ...children].sort());
      const out = `dist/wharf-${t}${t.includes("windows") ? ".exe" : ""}`;
      assert.deepEqual(words.slice(-5), ["--target", t, "--output", out, "main.ts"]);
    }
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
  name:
    "deploy.sh image: built offline from a clean clone, pushed and inspected, then run by Docker: serves as its user, healthcheck, a push listed and scanned in sandbox children",
  ignore: imageSkip !== null,
  ...serverTestOpts,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "wharf-image-" });
    // buildah's image store stays in the temp dir: nothing of the host's is read or written.
    const storage = join(dir, "storage.conf");
    await Deno.writeTextFile(
      storage,
      `[storage]\ndriver = "vfs"\ngraphroot = "${dir}/graph"\nrunroot = "${dir}/run"\n`,
    );
    const env = { CONTAINERS_STORAGE_CONF: storage, TMPDIR: dir };
    const archive = join(dir, "wharf.tar");
    const tag = "localhost/wharf-ci:test";
    let ns: Netns | null = null;
    try {
      const clone = join(dir, "wharf");
      const cl = await sh("git", ["clone", "--quiet", "--no-hardlinks", ROOT, clone]);
      assert.equal(cl.code, 0, cl.stderr);
      // Offline, as docs/deploy.md promises: the build sees no network at all.
      ns = await openNetns();
      const net = ns;

      await t.step("built offline with buildah from a clean clone; --push's command", async () => {
        const b = await net.run([
          "bash",
          "deploy.sh",
          "image",
          "--tag",
          tag,
          "--output",
          `docker-archive:${archive}`,
        ], { cwd: clone, env, timeoutMs: 300_000 });
        assert.equal(b.code, 0, `${b.stdout}\n${b.stderr}`);
        const dry = await sh("bash", [
          "deploy.sh",
          "image",
          "--dry-run",
          "--tag",
          tag,
          "--push",
          "docker://registry.example/wharf:1",
          "--tls-verify=false",
        ], { cwd: clone, env });
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(
          dry.stdout,
          /^buildah push --tls-verify=false localhost\/wharf-ci:test docker:\/\/registry\.example\/wharf:1$/m,
        );
      });

      // deno-lint-ignore no-explicit-any
      let config: any = null;
      await t.step("pushed to Wharf, its config as shipped", async () => {
        await withServer({}, async (s) => {
          const ref = `127.0.0.1:${s.port}/wharf/server:ci`;
          const cp = await sh("skopeo", [
            "--insecure-policy",
            "copy",
            "--dest-tls-verify=false",
            `docker-archive:${archive}`,
            `docker://${ref}`,
          ]);
          assert.equal(cp.code, 0, cp.stderr);
          const cfg = await sh("skopeo", [
            "inspect",
            "--tls-verify=false",
            "--config",
            "--raw",
            `docker://${ref}`,
          ]);
          assert.equal(cfg.code, 0, cfg.stderr);
          config = JSON.parse(cfg.stdout).config;
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
        });
        const c = config;
        assert.equal(c.User, "10001:10001");
        assert.deepEqual(Object.keys(c.Volumes), ["/data"]);
        assert.equal(c.WorkingDir, "/data");
        assert.deepEqual(Object.keys(c.ExposedPorts), ["5000/tcp"]);
        assert.deepEqual(c.Cmd, ["serve", "-c", "/etc/wharf/wharf.toml"]);
        assert.ok(c.Env.includes("PATH=/usr/local/bin"), "PATH's deno is the runtime");
        assert.ok(c.Env.includes("DENO_DIR=/opt/deno"));
        // the permission set of every Wharf process, never -A; packages from the image only
        assert.deepEqual(c.Entrypoint.slice(0, 5), [
          "/usr/local/bin/deno",
          "run",
          "--cached-only",
          "-P=wharf",
          "--config=/app/deno.json",
        ]);
        assert.ok(!c.Entrypoint.some((a: string) => a === "-A" || a.startsWith("--allow-")));
        assert.equal(c.Entrypoint.at(-1), "/app/main.ts");
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
      });

      await t.step({
        name:
          "run by Docker with its default command: serves, healthcheck, push listed and scanned",
        ignore: dockerSkip !== null,
        fn: async () => {
          assert.ok(config, "the image was not built");
          await runInDocker(net, dir, archive, tag, config);
        },
      });
    } finally {
      await ns?.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

async function runInDocker(
  net: Netns,
  dir: string,
  archive: string,
  tag: string,
  // deno-lint-ignore no-explicit-any
  config: any,
): Promise<void> {
  const name = "wharf-image-test";
  let docker: Docker | null = null;
  try {
    // The daemon in the namespace: `--network host` is the namespace's, port 5000 is free.
    docker = await startDocker({ netnsPid: net.pid });
    const d = docker;
    const ok = async (args: string[], timeoutMs = 120_000) => {
      const r = await d.docker(args, { timeoutMs });
      assert.equal(r.code, 0, `docker ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    assert.match(await ok(["load", "-i", archive], 180_000), new RegExp(`Loaded image: ${tag}`));
    await ok(["run", "-d", "--name", name, "--network", "host", tag]);
    const logs = async () => {
      const r = await d.docker(["logs", name], { timeoutMs: 10_000 });
      return `${r.stdout}${r.stderr}`;
    };
    const url = "http://localhost:5000";
    const deadline = Date.now() + 60_000;
    while ((await net.http(`${url}/healthz`)).status !== 200) {
      const state = (await ok(["inspect", "-f", "{{.State.Status}}", name])).trim();
      assert.ok(
        state === "running" && Date.now() < deadline,
        `the container never answered /healthz (${state}):\n${await logs()}`,
      );
      await new Promise((r) => setTimeout(r, 250));
    }
    const startup = await logs();
    assert.match(
      startup,
      /wharf listening on http:\/\/0\.0\.0\.0:5000 \(config \/etc\/wharf\/wharf\.toml; blobs \/data\/blobs; metadata \/data\/metadata\.kv;[^)]*sandbox process/,
    );
    // The server is the container's first process, as the image's user.
    const pid = (await ok(["inspect", "-f", "{{.State.Pid}}", name])).trim();
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    assert.match(status, /^Uid:\t10001\t10001\t10001\t10001$/m, status);
    assert.match(status, /^Gid:\t10001\t10001\t10001\t10001$/m, status);
    // The image's healthcheck command, as Docker runs it (in the container, as its user).
    await ok(["exec", name, ...config.Healthcheck.Test.slice(1)], 30_000);

    // A push into the container, then what only sandbox children make: the layer's listing and
    // the image's packages.
    const layout = await writeDebianLayout(join(dir, "layout"), "1");
    const push = await net.run([
      "skopeo",
      "copy",
      "--dest-tls-verify=false",
      `oci:${layout.dir}:1`,
      "docker://localhost:5000/demo/app:1",
    ]);
    assert.equal(push.code, 0, `skopeo copy: ${push.stderr}\n${await logs()}`);
    const log = () => "(docker logs are printed on failure below)";
    const withLogs = async <T>(p: Promise<T>): Promise<T> => {
      try {
        return await p;
      } catch (e) {
        throw new Error(
          `${e instanceof Error ? e.message : e}\n--- docker logs ---\n${await logs()}`,
        );
      }
    };
    assertDebianListing(
      await withLogs(
        pollJson(net, `${url}/v2/demo/app/_svc/layers/${layout.layer}/entries`, 60_000, log),
      ),
    );
    assertDebianReport(
      await withLogs(
        pollJson(net, `${url}/v2/demo/app/_svc/vulnerabilities/${layout.manifest}`, 60_000, log),
      ),
      layout,
    );

    // The bytes are in the /data volume, owned by the image's user.
    const mounts = JSON.parse(await ok(["inspect", "-f", "{{json .Mounts}}", name]));
    const data = mounts.find((m: { Destination: string }) => m.Destination === "/data");
    assert.ok(data, JSON.stringify(mounts));
    assert.equal((await Deno.stat(data.Source)).uid, 10001, "/data belongs to the image's user");
    const hex = layout.layer.slice("sha256:".length);
    const blob = await Deno.stat(
      join(data.Source, "blobs", "blobs", "sha256", hex.slice(0, 2), hex),
    );
    assert.ok(blob.isFile);
    assert.equal(blob.uid, 10001, "the pushed layer is written by the image's user");

    // `docker stop` (SIGTERM): finishes and says so.
    await ok(["stop", "-t", "20", name], 60_000);
    const out = await d.docker(["logs", name], { timeoutMs: 10_000 });
    assert.match(out.stdout, /wharf stopped\s*$/, `${out.stdout}${out.stderr}`);
    const code = (await ok(["inspect", "-f", "{{.State.ExitCode}}", name])).trim();
    assert.equal(code, "0");
  } finally {
    if (docker) {
      await docker.docker(["rm", "-f", name], { timeoutMs: 30_000 }).catch(() => {});
      await docker.stop();
    }
  }
}
