// Layer index, side by side with the tar tools in one run (issue: layer index, Performance):
// a layer made of this machine's /usr/lib files (~2 GiB of tar by default), as gzip and as zstd,
// 1. index time through Wharf (first `entries` request → 200) against `tar -tzvf` and
//    `zstd -dc | tar -tv` on the same file;
// 2. random reads through the `file` endpoint (64 KiB at a random offset of a random file),
//    p50/p99, for each encoding;
// 3. index size (listing + checkpoints or the zstd side copy) as % of the layer;
// 4. Wharf's peak RSS while indexing (VmHWM, the process holds nothing else).
// Run: deno run -A --unstable-kv bench/index_bench.ts [--small]   (BENCH_INDEX_MB sets the tar size)
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { wharfCommand } from "../tests/helpers/launch.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SMALL = Deno.args.includes("--small");
const TAR_MB = Number(Deno.env.get("BENCH_INDEX_MB") ?? (SMALL ? 128 : 2048));
const READS = SMALL ? 50 : 300;
/** BENCH_INDEX_ENC=gzip or zstd runs one encoding only (for iterating). */
const ONLY = Deno.env.get("BENCH_INDEX_ENC");

async function sh(cmd: string): Promise<number> {
  const t0 = performance.now();
  const out = await new Deno.Command("bash", { args: ["-c", cmd], stderr: "piped" }).output();
  if (!out.success) throw new Error(`${cmd}: ${new TextDecoder().decode(out.stderr)}`);
  return (performance.now() - t0) / 1000;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

function vmHwmMiB(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+) kB/.exec(s)![1]) / 1024;
}

function vmRssMiB(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]) / 1024;
}

function resetHwm(pid: number): void {
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux ≥ 4.0).
  try {
    Deno.writeTextFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch { /* not permitted: the peak then covers startup too */ }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function main() {
  const dir = await Deno.makeTempDir({ prefix: "wharf-index-bench-" });
  try {
    // ---- the layer ----
    const list = join(dir, "files.txt");
    const tar = join(dir, "layer.tar");
    await sh(
      `find /usr/lib -xdev \\( -type f -o -type l -o -type d \\) -printf '%s %p\\n' 2>/dev/null | sort -k2 | ` +
        `awk -v max=${TAR_MB * 1024 * 1024} '{ t += $1; if (t > max) exit; print $2 }' > ${list}`,
    );
    await sh(`tar --no-recursion --format=pax -cf ${tar} -T ${list} 2>/dev/null || true`);
    await sh(`gzip -6 -c ${tar} > ${tar}.gz`);
    await sh(`zstd -q -3 -c ${tar} > ${tar}.zst`);
    const tarSize = (await Deno.stat(tar)).size;
    const gzSize = (await Deno.stat(`${tar}.gz`)).size;
    const zsSize = (await Deno.stat(`${tar}.zst`)).size;
    await Deno.remove(tar);
    console.log(
      `layer: ${(tarSize / 2 ** 20).toFixed(0)} MiB tar, gzip ${
        (gzSize / 2 ** 20).toFixed(0)
      } MiB, zstd ${(zsSize / 2 ** 20).toFixed(0)} MiB`,
    );

    // ---- baselines (warm page cache: run once first) ----
    await sh(`tar -tzvf ${tar}.gz > /dev/null`);
    const tarGz = await sh(`tar -tzvf ${tar}.gz > /dev/null`);
    const tarZs = await sh(`zstd -dc ${tar}.zst | tar -tv > /dev/null`);

    // ---- Wharf ----
    const port = freePort();
    const cfg = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      cfg,
      `[server]\nbind_address = "127.0.0.1"\nport = ${port}\n[blob_store.fs]\nroot_dir = "${dir}/blobs"\n` +
        `[metadata_store]\npath = "${dir}/m.kv"\n[global.index]\non_push = "none"\n` +
        `[global.job_queue]\npoll_interval_ms = 50\n`,
    );
    const child = wharfCommand(["serve", "-c", cfg], {
      stdout: "piped",
      stderr: "inherit",
      env: { NO_COLOR: "1" },
    }).spawn();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!out.includes("listening on")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`server exited: ${out}`);
      out += value;
    }
    reader.releaseLock();
    child.stdout.cancel().catch(() => {});
    const url = `http://127.0.0.1:${port}`;
    const results: Record<string, unknown> = {
      tar_mib: tarSize / 2 ** 20,
      tar_tzvf_s: tarGz,
      zstd_tar_tv_s: tarZs,
    };
    try {
      for (
        const [enc, file, size, mediaType, baseline] of [
          ["gzip", `${tar}.gz`, gzSize, "application/vnd.oci.image.layer.v1.tar+gzip", tarGz],
          ["zstd", `${tar}.zst`, zsSize, "application/vnd.oci.image.layer.v1.tar+zstd", tarZs],
        ] as const
      ) {
        if (ONLY && ONLY !== enc) continue;
        const ns = `bench/${enc}`;
        const digest = "sha256:" + (await new Deno.Command("sha256sum", { args: [file] }).output()
          .then((o) => new TextDecoder().decode(o.stdout).split(" ")[0]));
        // curl sends the file with its Content-Length (a monolithic POST): Deno's fetch streams
        // a file body chunked, at ~8 MB/s here, which would measure the client.
        const up = await new Deno.Command("curl", {
          args: [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "content-type: application/octet-stream",
            "--data-binary",
            `@${file}`,
            `${url}/v2/${ns}/blobs/uploads/?digest=${digest}`,
          ],
          stdout: "piped",
        }).output();
        const code = new TextDecoder().decode(up.stdout);
        if (code !== "201") throw new Error(`push ${code}`);
        const cfgBody = new TextEncoder().encode(`{"architecture":"amd64","os":"linux"}`);
        const cfgDigest = "sha256:" + Array.from(
          new Uint8Array(await crypto.subtle.digest("SHA-256", cfgBody)),
          (b) => b.toString(16).padStart(2, "0"),
        ).join("");
        await (await fetch(`${url}/v2/${ns}/blobs/uploads/?digest=${cfgDigest}`, {
          method: "POST",
          body: cfgBody,
        })).body?.cancel();
        const m = await fetch(`${url}/v2/${ns}/manifests/v1`, {
          method: "PUT",
          headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
          body: JSON.stringify({
            schemaVersion: 2,
            mediaType: "application/vnd.oci.image.manifest.v1+json",
            config: {
              mediaType: "application/vnd.oci.image.config.v1+json",
              digest: cfgDigest,
              size: cfgBody.length,
            },
            layers: [{ mediaType, digest, size }],
          }),
        });
        if (m.status !== 201) throw new Error(`manifest ${m.status} ${await m.text()}`);

        const rssAfterPush = vmRssMiB(child.pid);
        resetHwm(child.pid);
        const hwmAfterReset = vmHwmMiB(child.pid);
        const base = `${url}/v2/${ns}/_svc/layers/${digest}`;
        const t0 = performance.now();
        let listing: { entries: { path: string; kind: string; size: number }[] } | null = null;
        for (;;) {
          const r = await fetch(`${base}/entries`);
          if (r.status === 200) {
            listing = await r.json();
            break;
          }
          await r.body?.cancel();
          if (r.status !== 202) throw new Error(`entries ${r.status}`);
          await new Promise((res) => setTimeout(res, 50));
        }
        const indexS = (performance.now() - t0) / 1000;
        const peak = vmHwmMiB(child.pid);
        const [alg, hex] = digest.split(":");
        const du = new TextDecoder().decode(
          (await new Deno.Command("du", {
            args: ["-sb", join(dir, "blobs", "derived", "index", alg, hex)],
          }).output()).stdout,
        );
        const indexBytes = Number(du.split(/\s/)[0]);

        const files = listing!.entries.filter((e) => e.kind === "file" && e.size > 0);
        const lat: number[] = [];
        for (let i = 0; i < READS; i++) {
          const e = files[Math.floor(Math.random() * files.length)];
          const start = Math.floor(Math.random() * e.size);
          const end = Math.min(e.size - 1, start + 65535);
          const t = performance.now();
          const r = await fetch(`${base}/file?path=${encodeURIComponent(e.path)}`, {
            headers: { range: `bytes=${start}-${end}` },
          });
          const got = (await r.arrayBuffer()).byteLength;
          lat.push(performance.now() - t);
          if (r.status !== 206 || got !== end - start + 1) {
            throw new Error(`read ${e.path} ${r.status} ${got}`);
          }
        }
        const row = {
          rss_after_push_mib: rssAfterPush,
          hwm_after_reset_mib: hwmAfterReset,
          layer_mib: size / 2 ** 20,
          entries: listing!.entries.length,
          index_s: indexS,
          baseline_s: baseline,
          ratio_vs_tar: baseline / indexS,
          mib_per_s_compressed: size / 2 ** 20 / indexS,
          index_size_pct: (100 * indexBytes) / size,
          read_p50_ms: pct(lat, 50),
          read_p99_ms: pct(lat, 99),
          peak_rss_mib: peak,
        };
        results[enc] = row;
        console.log(`${enc}: ${JSON.stringify(row)}`);
      }
    } finally {
      child.kill("SIGTERM");
      await child.status;
    }
    const outDir = join(ROOT, "bench", "out");
    await Deno.mkdir(outDir, { recursive: true });
    await Deno.writeTextFile(join(outDir, "index.json"), JSON.stringify(results, null, 2));
    const none = new Proxy({}, { get: () => NaN });
    const g = (results.gzip ?? none) as Record<string, number>;
    const z = (results.zstd ?? none) as Record<string, number>;
    const f = (n: number, d = 2) => n.toFixed(d);
    console.log(`
| ${f(tarSize / 2 ** 20, 0)} MiB tar      | gzip (${f(g.layer_mib, 0)} MiB) | zstd (${
      f(z.layer_mib, 0)
    } MiB) |
|---|---|---|
| tar tool listing (s)      | ${f(g.baseline_s)} | ${f(z.baseline_s)} |
| Wharf index (s)           | ${f(g.index_s)} | ${f(z.index_s)} |
| Wharf / tool speed        | ${f(g.ratio_vs_tar)}× | ${f(z.ratio_vs_tar)}× |
| entries                   | ${g.entries} | ${z.entries} |
| index size, % of layer    | ${f(g.index_size_pct)} % | ${f(z.index_size_pct)} % |
| 64 KiB file read p50 (ms) | ${f(g.read_p50_ms)} | ${f(z.read_p50_ms)} |
| 64 KiB file read p99 (ms) | ${f(g.read_p99_ms)} | ${f(z.read_p99_ms)} |
| peak RSS indexing (MiB)   | ${f(g.peak_rss_mib, 0)} | ${f(z.peak_rss_mib, 0)} |
`);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

await main();
