// Image reports (issue: image reports): load a generated advisory set of 100k OSV records (one
// `all.zip`, as OSV publishes per ecosystem), then scan an image whose dpkg database lists ~900
// packages (this machine's own status file, padded with generated packages) against it. Reports
// the advisory load time and KV entries, the scan time after indexing (target < 2 s), Wharf's peak
// RSS, and the findings count.
// Run: deno run -A --unstable-kv bench/scan_bench.ts [--records N]   (loopback only)
import { crc32, deflateRawSync, gzipSync } from "node:zlib";
import { join } from "node:path";
import { pushBlob, runCli, startServer } from "../tests/helpers/server.ts";
import { jsonBytes, OCI_CONFIG, OCI_MANIFEST } from "../tests/helpers/oci_content.ts";
import { tarOf } from "../tests/helpers/tar.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const RECORDS = arg("--records", 100_000);
const PACKAGES = 900;

/** A stored-or-deflated ZIP written in one pass (enough for a bench fixture). */
function zip(members: Array<[string, Uint8Array]>): Uint8Array {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const [name, data] of members) {
    const n = enc.encode(name);
    const comp = new Uint8Array(deflateRawSync(data));
    const crc = crc32(data) >>> 0;
    const lh = new DataView(new ArrayBuffer(30));
    lh.setUint32(0, 0x04034b50, true);
    lh.setUint16(4, 20, true);
    lh.setUint16(8, 8, true);
    lh.setUint32(14, crc, true);
    lh.setUint32(18, comp.length, true);
    lh.setUint32(22, data.length, true);
    lh.setUint16(26, n.length, true);
    parts.push(new Uint8Array(lh.buffer), n, comp);
    const ch = new DataView(new ArrayBuffer(46));
    ch.setUint32(0, 0x02014b50, true);
    ch.setUint16(4, 20, true);
    ch.setUint16(6, 20, true);
    ch.setUint16(10, 8, true);
    ch.setUint32(16, crc, true);
    ch.setUint32(20, comp.length, true);
    ch.setUint32(24, data.length, true);
    ch.setUint16(28, n.length, true);
    ch.setUint32(42, offset, true);
    central.push(new Uint8Array(ch.buffer), n);
    offset += 30 + n.length + comp.length;
  }
  const cdSize = central.reduce((a, b) => a + b.length, 0);
  // Past 65,535 members the counts live in a ZIP64 end record (as Go's archive/zip writes
  // osv.dev's dumps); the classic end record then holds 0xffff.
  const tail: Uint8Array[] = [];
  const big = members.length > 0xfffe;
  if (big) {
    const e64 = new DataView(new ArrayBuffer(56));
    e64.setUint32(0, 0x06064b50, true);
    e64.setBigUint64(4, 44n, true);
    e64.setUint16(12, 45, true);
    e64.setUint16(14, 45, true);
    e64.setBigUint64(24, BigInt(members.length), true);
    e64.setBigUint64(32, BigInt(members.length), true);
    e64.setBigUint64(40, BigInt(cdSize), true);
    e64.setBigUint64(48, BigInt(offset), true);
    const loc = new DataView(new ArrayBuffer(20));
    loc.setUint32(0, 0x07064b50, true);
    loc.setBigUint64(8, BigInt(offset + cdSize), true);
    loc.setUint32(16, 1, true);
    tail.push(new Uint8Array(e64.buffer), new Uint8Array(loc.buffer));
  }
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, big ? 0xffff : members.length, true);
  end.setUint16(10, big ? 0xffff : members.length, true);
  end.setUint32(12, cdSize, true);
  end.setUint32(16, offset, true);
  tail.push(new Uint8Array(end.buffer));
  const all = [...parts, ...central, ...tail];
  const out = new Uint8Array(all.reduce((a, b) => a + b.length, 0));
  let at = 0;
  for (const p of all) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function vmHwmMiB(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+) kB/.exec(s)![1]) / 1024;
}

async function main() {
  // ~900 packages: the machine's own database, then generated ones up to PACKAGES.
  const own = await Deno.readTextFile("/var/lib/dpkg/status");
  const stanzas = own.split(/\n\n+/).filter((s) => /^Status: install ok installed$/m.test(s));
  const names = stanzas.map((s) => /^Package: (.+)$/m.exec(s)![1]);
  let status = stanzas.join("\n\n") + "\n";
  for (let i = stanzas.length; i < PACKAGES; i++) {
    const name = `genpkg${i}`;
    names.push(name);
    status +=
      `\nPackage: ${name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.${i}-1\n`;
  }
  // 100k records over the image's packages and many others: ~1 in 10 names the image's.
  const enc = new TextEncoder();
  const members: Array<[string, Uint8Array]> = [];
  for (let i = 0; i < RECORDS; i++) {
    const pkg = i % 10 === 0 ? names[i % names.length] : `other${i % 20_000}`;
    const rec = {
      id: `DEBIAN-CVE-2099-${i}`,
      aliases: [`CVE-2099-${i}`],
      modified: "2099-01-01T00:00:00Z",
      summary: `generated advisory ${i} for ${pkg}`,
      affected: [{
        package: { ecosystem: "Debian:12", name: pkg },
        ranges: [{
          type: "ECOSYSTEM",
          events: [{ introduced: "0" }, { fixed: i % 3 === 0 ? "99:1" : "0.1" }],
        }],
      }],
      references: [{ url: `https://example.invalid/${i}` }],
    };
    members.push([`DEBIAN-CVE-2099-${i}.json`, enc.encode(JSON.stringify(rec))]);
  }
  const adv = await Deno.makeTempDir({ prefix: "wharf-scan-bench-" });
  await Deno.mkdir(join(adv, "Debian"));
  await Deno.writeFile(join(adv, "Debian", "all.zip"), zip(members));
  members.length = 0;

  const s = await startServer({
    unchecked: true,
    config: `[global.job_queue]\npoll_interval_ms = 50\n[scan]\nadvisories_dir = ${
      JSON.stringify(adv)
    }\non_push = false\n`,
  });
  try {
    const base = vmHwmMiB(s.pid);
    // Advisory load: from the first poll of the watch until the snapshot is current.
    const t0 = performance.now();
    let cli = "";
    for (;;) {
      const st = await runCli(s, "scan", ["--status"]);
      cli = st.stdout;
      if (/snapshot/.test(cli)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const loadWall = (performance.now() - t0) / 1000;
    const loadMs = Number(/in (\d+) ms/.exec(cli)![1]);
    const afterLoad = vmHwmMiB(s.pid);

    // The image: os-release + the status file, gzip layer.
    const layer = new Uint8Array(gzipSync(tarOf([
      { path: "etc/os-release", data: 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"\n' },
      { path: "var/lib/dpkg/status", data: status },
    ])));
    const cfg = jsonBytes({ architecture: "amd64", os: "linux" });
    const config = await pushBlob(s.url, "bench/scan", cfg);
    const ld = await pushBlob(s.url, "bench/scan", layer);
    const m = jsonBytes({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
      layers: [{
        mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
        digest: ld,
        size: layer.length,
      }],
    });
    const put = await fetch(`${s.url}/v2/bench/scan/manifests/v1`, {
      method: "PUT",
      headers: { "content-type": OCI_MANIFEST },
      body: m as BodyInit,
    });
    await put.body?.cancel();
    const digest = put.headers.get("docker-content-digest")!;
    // Index first (the scan target excludes it), then time the scan alone.
    for (;;) {
      const r = await fetch(`${s.url}/v2/bench/scan/_svc/layers/${ld}/entries`);
      await r.body?.cancel();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    const t1 = performance.now();
    let report: { packages: unknown[]; findings: unknown[]; counts: unknown } | null = null;
    for (;;) {
      const r = await fetch(`${s.url}/v2/bench/scan/_svc/vulnerabilities/${digest}`);
      if (r.status === 200) {
        report = await r.json();
        break;
      }
      await r.body?.cancel();
      await new Promise((res) => setTimeout(res, 20));
    }
    const scanS = (performance.now() - t1) / 1000;
    if (Deno.env.get("DEBUG")) console.log(JSON.stringify(report).slice(0, 3000));
    const peak = vmHwmMiB(s.pid);
    const out = {
      records: RECORDS,
      packages: report!.packages.length,
      findings: report!.findings.length,
      advisory_load_s: loadMs / 1000,
      advisory_load_wall_s: loadWall,
      scan_s_incl_polling: scanS,
      rss_mib: { idle: base, after_load: afterLoad, peak },
    };
    console.log(JSON.stringify(out, null, 2));
    await Deno.mkdir(new URL("./out/", import.meta.url), { recursive: true });
    await Deno.writeTextFile(
      new URL("./out/scan.json", import.meta.url),
      JSON.stringify(out, null, 2),
    );
  } finally {
    await s.stop();
    if (Deno.env.get("KEEP_ADV")) console.log("advisories kept in", adv);
    else await Deno.remove(adv, { recursive: true });
  }
}

await main();
