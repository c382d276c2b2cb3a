// Scheduled pull sync (issue 24 part 2, Performance): 50 tags of a 3-layer image held by
// Debian's docker-registry, brought into a fresh Wharf by `main.ts sync` (one run of a
// `[[repository."hub".sync]]` entry, pull-through cache machinery) and by `skopeo sync` of the
// same 50 tags from the same docker-registry into the same kind of fresh Wharf (a hosted
// namespace, over HTTP). Each tag is its own image: two base layers every tag shares (8 and
// 4 MiB) and a 256 KiB layer of its own, as 50 releases of one image are. Rounds alternate;
// medians reported. Both sides are whole processes timed from start to exit (Deno's start
// included for Wharf). Wall time on a shared 2-core machine: noisy, compare within one run.
// Run: deno run -A --unstable-kv bench/sync_bench.ts [--small]   (loopback only)
import { join } from "node:path";
import { freePort, startDistribution } from "../tests/e2e/_distribution.ts";
import { pushImage } from "../tests/e2e/_sync_upstream.ts";
import { wharfCommand } from "../tests/helpers/launch.ts";

const SMALL = Deno.args.includes("--small");
const TAGS = SMALL ? 10 : 50;
const ROUNDS = SMALL ? 1 : 3;
const NAME = "team/app";

function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(b.subarray(i, Math.min(n, i + 65536)));
  return b;
}

interface Wharf {
  url: string;
  host: string;
  dir: string;
  config: string;
  stop(): Promise<void>;
}

/** A fresh Wharf: `hub` caches the docker-registry; its sync entry is in `config` only. */
async function startWharf(upstream: string): Promise<Wharf> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-sync-bench-" });
  const port = freePort();
  const base = `[server]\nbind_address = "127.0.0.1"\nport = ${port}\n` +
    `[blob_store.fs]\nroot_dir = "${dir}/blobs"\n[metadata_store]\npath = "${dir}/m.kv"\n` +
    // No indexing or scanning of what skopeo pushes: both sides do the transfer alone.
    `[global.index]\non_push = "none"\n[scan]\non_push = false\n` +
    `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${upstream}"\n`;
  await Deno.writeTextFile(join(dir, "serve.toml"), base);
  const config = join(dir, "sync.toml");
  await Deno.writeTextFile(
    config,
    base + `[[repository."hub".sync]]\nnamespaces = ["${NAME}"]\nmax_tags_per_run = 1000\n`,
  );
  const child = wharfCommand(["serve", "-c", join(dir, "serve.toml")], {
    stdout: "piped",
    stderr: "inherit",
    env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("listening on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`wharf exited: ${out}`);
    out += value;
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  return {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    dir,
    config,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Seconds `command` (named `what` in an error) takes to exit 0. */
async function timed(what: string, command: Deno.Command): Promise<number> {
  const t0 = performance.now();
  const out = await command.output();
  const secs = (performance.now() - t0) / 1000;
  if (out.code !== 0) {
    const dec = new TextDecoder();
    throw new Error(`${what}: ${dec.decode(out.stdout)}${dec.decode(out.stderr)}`);
  }
  return secs;
}

const quiet = {
  stdout: "piped",
  stderr: "piped",
  env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
} as const;

async function tagCount(url: string, name: string): Promise<number> {
  const r = await fetch(`${url}/v2/${name}/tags/list`);
  return r.status === 200 ? ((await r.json()).tags ?? []).length : 0;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const dist = await startDistribution();
try {
  const base1 = randomBytes(8 << 20);
  const base2 = randomBytes(4 << 20);
  for (let i = 0; i < TAGS; i++) {
    await pushImage(dist.url, NAME, `release ${i}`, "amd64", [
      base1,
      base2,
      randomBytes(256 << 10),
    ], `1.${i}`);
  }
  const wharf: number[] = [];
  const skopeo: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    {
      const w = await startWharf(dist.url);
      try {
        wharf.push(
          await timed("main.ts sync", wharfCommand(["sync", "-c", w.config], quiet)),
        );
        const n = await tagCount(w.url, `hub/${NAME}`);
        if (n !== TAGS) throw new Error(`wharf sync cached ${n} of ${TAGS} tags`);
      } finally {
        await w.stop();
      }
    }
    {
      const w = await startWharf(dist.url);
      try {
        skopeo.push(
          await timed(
            "skopeo sync",
            new Deno.Command("skopeo", {
              ...quiet,
              args: [
                "sync",
                "--src",
                "docker",
                "--dest",
                "docker",
                "--src-tls-verify=false",
                "--dest-tls-verify=false",
                `${dist.host}/${NAME}`,
                `${w.host}/mirror`,
              ],
            }),
          ),
        );
        const n = await tagCount(w.url, `mirror/app`);
        if (n !== TAGS) throw new Error(`skopeo sync copied ${n} of ${TAGS} tags`);
      } finally {
        await w.stop();
      }
    }
    console.log(
      `round ${round + 1}: main.ts sync ${wharf[round].toFixed(2)} s, skopeo sync ${
        skopeo[round].toFixed(2)
      } s`,
    );
  }
  const w = median(wharf);
  const s = median(skopeo);
  console.log(
    `${TAGS} tags of a 3-layer image (8 MiB + 4 MiB shared, 256 KiB each) from docker-registry:\n` +
      `  main.ts sync  median ${w.toFixed(2)} s  (${wharf.map((x) => x.toFixed(2)).join(", ")})\n` +
      `  skopeo sync   median ${s.toFixed(2)} s  (${
        skopeo.map((x) => x.toFixed(2)).join(", ")
      })\n` +
      `  speed vs skopeo: ${(s / w).toFixed(2)}x (target >= 1.0x)`,
  );
} finally {
  await dist.stop();
}
