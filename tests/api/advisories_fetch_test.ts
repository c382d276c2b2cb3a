// Advisories that arrive by themselves (docs/scanning.md#downloading-advisories), against a
// local OSV source that serves zips with ETags, answers 304s and ranges, and can cut a body
// short, serve a truncated zip, announce a wrong MD5 or fail with a 500. Every config here
// names that source: the default (osv.dev) is never contacted.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { ConfigError, loadConfigFiles } from "../../lib/config/mod.ts";
import { req, serverTestOpts } from "../helpers/api.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { zipOf } from "../helpers/zip.ts";

const enc = new TextEncoder();

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 3
`;

const osv = (id: string, name: string, fixed: string) =>
  JSON.stringify({
    id,
    modified: "2024-06-01T00:00:00Z",
    summary: `${id} in ${name}`,
    affected: [{
      package: { ecosystem: "Debian:12", name },
      ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed }] }],
    }],
  });

/** Debian's dump, version `n`: each version adds one advisory. Padded so a cut lands mid-file. */
function debianZip(n: number): Uint8Array {
  const files: Record<string, string> = {};
  for (let i = 1; i <= n; i++) {
    files[`DEBIAN-CVE-2024-900${i}.json`] = osv(`DEBIAN-CVE-2024-900${i}`, "openssl", "3.0.99-1");
  }
  // Incompressible filler, so the archive is large enough to be cut in two.
  const filler = Array.from({ length: 4000 }, (_, i) => createHash("md5").update(`${n}:${i}`))
    .map((h) => h.digest("hex")).join("");
  files["filler.txt"] = filler;
  return zipOf(files, { deflate: true });
}

type Mode = "ok" | "cut" | "truncated" | "error" | "bad-md5";

interface Served {
  method: string;
  path: string;
  status: number;
  ifNoneMatch: string | null;
  range: string | null;
  ifRange: string | null;
}

/** The OSV bucket stand-in: `/<Ecosystem>/all.zip` of the current version and mode. */
function osvSource() {
  const state = { version: 1, mode: "ok" as Mode, log: [] as Served[] };
  const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("base64");
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (r) => {
    const path = new URL(r.url).pathname;
    const h = (n: string) => r.headers.get(n);
    const served = (status: number) => {
      state.log.push({
        method: r.method,
        path,
        status,
        ifNoneMatch: h("if-none-match"),
        range: h("range"),
        ifRange: h("if-range"),
      });
    };
    if (path !== "/Debian/all.zip") {
      served(404);
      return new Response("no such object", { status: 404 });
    }
    if (state.mode === "error") {
      served(500);
      return new Response("backend error", { status: 500 });
    }
    const full = debianZip(state.version);
    const etag = `"v${state.version}${state.mode === "truncated" ? "t" : ""}"`;
    const bytes = state.mode === "truncated" ? full.subarray(0, full.length >> 1) : full;
    const headers: Record<string, string> = {
      etag,
      "last-modified": new Date(Date.UTC(2024, 5, state.version)).toUTCString(),
      "x-goog-hash": `crc32c=AAAAAA==,md5=${
        state.mode === "bad-md5" ? md5(enc.encode("other")) : md5(bytes)
      }`,
    };
    if (h("if-none-match") === etag) {
      served(304);
      return new Response(null, { status: 304, headers: { etag } });
    }
    let start = 0;
    const m = /^bytes=(\d+)-$/.exec(h("range") ?? "");
    if (m && h("if-range") === etag && Number(m[1]) < bytes.length) start = Number(m[1]);
    const body = bytes.subarray(start);
    const status = start > 0 ? 206 : 200;
    if (start > 0) headers["content-range"] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
    headers["content-length"] = String(body.length);
    served(status);
    if (state.mode !== "cut") return new Response(body.slice(), { status, headers });
    // Half the bytes, then the connection breaks.
    const half = body.subarray(0, body.length >> 1);
    return new Response(
      new ReadableStream({
        start(c) {
          c.enqueue(half.slice());
        },
        async pull(c) {
          await new Promise((res) => setTimeout(res, 50));
          c.error(new Error("cut"));
        },
      }),
      { status, headers },
    );
  });
  const url = `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`;
  return { state, url, full: () => debianZip(state.version), close: () => server.shutdown() };
}

/** `main.ts advisories …` with a config file, as a process. */
async function cli(args: string[], config: string): Promise<{ code: number; out: string }> {
  const o = await wharfCommand([...args, "-c", config], { env: { NO_COLOR: "1" } }).output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout) + dec.decode(o.stderr) };
}

const fileBytes = (p: string) => Deno.readFile(p);

Deno.test({
  ...serverTestOpts,
  name:
    "advisories fetch: downloads, then 304s; a cut download resumes with If-Range; truncated, wrong-MD5 and 500 answers never replace the good file; status says so",
  fn: async () => {
    const src = osvSource();
    const dir = await Deno.makeTempDir({ prefix: "wharf-advfetch-" });
    try {
      const adv = join(dir, "osv");
      const config = join(dir, "wharf.toml");
      await Deno.writeTextFile(
        config,
        `[metadata_store]\npath = ${JSON.stringify(join(dir, "m.kv"))}\n` +
          `[scan]\nadvisories_url = ${JSON.stringify(src.url)}\n`,
      );
      const zip = join(adv, "Debian", "all.zip");
      const fetchDebian = () =>
        cli(["advisories", "fetch", "--dir", adv, "--ecosystem", "Debian"], config);

      let r = await fetchDebian();
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /^Debian: updated/m);
      assert.deepEqual(await fileBytes(zip), src.full());
      const st = JSON.parse(await Deno.readTextFile(zip + ".fetch"));
      assert.equal(st.etag, '"v1"');
      assert.equal(st.url, `${src.url}/Debian/all.zip`);

      // Unchanged: asked conditionally, answered 304, nothing rewritten.
      const before = (await Deno.stat(zip)).mtime;
      r = await fetchDebian();
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /^Debian: unchanged/m);
      assert.equal(src.state.log.at(-1)!.ifNoneMatch, '"v1"');
      assert.equal(src.state.log.at(-1)!.status, 304);
      assert.deepEqual((await Deno.stat(zip)).mtime, before);

      // A new version whose transfer breaks half-way: the old file stays, the part is kept.
      src.state.version = 2;
      src.state.mode = "cut";
      r = await fetchDebian();
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /^Debian: failed: .*cut off.*kept, resumed next time/m);
      assert.deepEqual(await fileBytes(zip), debianZip(1));
      const kept = (await Deno.stat(zip + ".part")).size;
      assert.ok(kept > 0 && kept < debianZip(2).length, String(kept));

      // The next run resumes where the cut left off, against the same version only.
      src.state.mode = "ok";
      r = await fetchDebian();
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /^Debian: updated, .*\(resumed at/m);
      const resumed = src.state.log.at(-1)!;
      assert.equal(resumed.range, `bytes=${kept}-`);
      assert.equal(resumed.ifRange, '"v2"');
      assert.equal(resumed.status, 206);
      assert.deepEqual(await fileBytes(zip), debianZip(2));
      await assert.rejects(Deno.stat(zip + ".part"), Deno.errors.NotFound);

      // A truncated zip, a wrong MD5 and a 500: refused, the good file stays.
      for (
        const [mode, why] of [
          ["truncated", /not a whole zip/],
          ["bad-md5", /MD5 .* the source announced/],
          ["error", /500/],
        ] as const
      ) {
        src.state.version = 3;
        src.state.mode = mode;
        r = await fetchDebian();
        assert.equal(r.code, 1, `${mode}: ${r.out}`);
        assert.match(r.out, why);
        assert.deepEqual(await fileBytes(zip), debianZip(2), mode);
        await assert.rejects(Deno.stat(zip + ".part"), Deno.errors.NotFound, mode);
      }

      const status = await cli(["advisories", "status", "--dir", adv], config);
      assert.equal(status.code, 0, status.out);
      assert.match(status.out, /^advisories: none loaded/m);
      assert.match(status.out, /^downloads: only by "advisories fetch"/m);
      assert.match(
        status.out,
        /^ {2}Debian: all\.zip [\d.]+ MiB, fetched \S+Z, last checked \S+Z, etag "v2"; last attempt failed \S+Z: .*500/m,
      );

      // Names that are not ecosystems never become paths.
      const bad = await cli(["advisories", "fetch", "--dir", adv, "--ecosystem", "../etc"], config);
      assert.equal(bad.code, 2, bad.out);
      assert.match(bad.out, /--ecosystem needs an OSV ecosystem name/);
    } finally {
      await src.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

const OS_RELEASE = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
ID=debian
VERSION_ID="12"
`;
const STATUS = `Package: openssl
Status: install ok installed
Architecture: amd64
Version: 3.0.11-1~deb12u1
`;

interface Report {
  advisories: { snapshot: string } | null;
  refreshing?: boolean;
  findings: { id: string }[];
}

async function report(s: TestServer, path: string): Promise<Report | null> {
  const r = await req(s, path);
  if (r.status === 202) {
    await r.body?.cancel();
    return null;
  }
  assert.equal(r.status, 200, await r.clone().text());
  return await r.json();
}

async function until<T>(
  what: string,
  f: () => Promise<T | null | undefined | false>,
  s: TestServer,
) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`${what}: timed out\n${s.output().slice(-4000)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

Deno.test({
  ...serverTestOpts,
  name:
    "advisories refresh: a pushed Debian image brings Debian's dump in, its report gains findings; the interval re-asks with If-None-Match; a 500 and a truncated zip leave the snapshot serving; a new dump is loaded and rescanned",
  fn: async () => {
    const src = osvSource();
    const adv = await Deno.makeTempDir({ prefix: "wharf-advrefresh-" });
    try {
      await withServer({
        config: `${FAST}
[scan]
advisories_dir = ${JSON.stringify(adv)}
advisories_url = ${JSON.stringify(src.url)}
refresh_interval_secs = 2
reload_interval_secs = 1
`,
      }, async (s) => {
        // Nothing is fetched while no image needs anything.
        await new Promise((res) => setTimeout(res, 1500));
        assert.equal(src.state.log.length, 0, "nothing asked for before an image needs it");
        const img = await pushTarImage(s.url, "app/deb", "v1", [
          tarOf([
            { path: "etc/os-release", data: OS_RELEASE },
            { path: "var/lib/dpkg/status", data: STATUS },
          ]),
        ]);
        const path = `/v2/app/deb/_svc/vulnerabilities/${img.digest}`;
        const first = await until("a report with Debian's advisory", async () => {
          const r = await report(s, path);
          return r?.advisories && !r.refreshing && r.findings.length === 1 ? r : null;
        }, s);
        assert.deepEqual(first.findings.map((f) => f.id), ["DEBIAN-CVE-2024-9001"]);
        assert.equal(src.state.log[0].path, "/Debian/all.zip");
        assert.equal(src.state.log[0].status, 200);

        // The interval's next run asks conditionally.
        await until(
          "a conditional re-check",
          () =>
            Promise.resolve(
              src.state.log.some((l) => l.status === 304 && l.ifNoneMatch === '"v1"'),
            ),
          s,
        );

        // A failing source and a truncated dump: the loaded snapshot keeps serving.
        for (const mode of ["error", "truncated"] as const) {
          src.state.version = 2;
          src.state.mode = mode;
          const seen = src.state.log.length;
          await until(
            `a ${mode} answer`,
            () => Promise.resolve(src.state.log.slice(seen).some((l) => l.method === "GET")),
            s,
          );
          await new Promise((res) => setTimeout(res, 1500));
          const r = (await report(s, path))!;
          assert.equal(r.advisories?.snapshot, first.advisories!.snapshot, mode);
          assert.equal(r.findings.length, 1, mode);
        }
        const st = JSON.parse(await Deno.readTextFile(join(adv, "Debian", "all.zip.fetch")));
        assert.match(st.error, /not a whole zip|500/);

        // A good new dump: loaded, and the image rescanned against it.
        src.state.mode = "ok";
        const second = await until("a report with both advisories", async () => {
          const r = await report(s, path);
          return r?.advisories && !r.refreshing && r.findings.length === 2 ? r : null;
        }, s);
        assert.notEqual(second.advisories!.snapshot, first.advisories!.snapshot);

        const status = await runCli(s, "advisories", ["status"]);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /^advisories: snapshot \S+ loaded .* 2 records/m);
        assert.match(status.stdout, new RegExp(`^downloads: every 2 s from ${src.url}`, "m"));
        assert.match(status.stdout, /^last download run: started \S+Z, finished \S+Z; updated/m);
        assert.match(status.stdout, /^ {2}Debian: all\.zip [\d.]+ MiB, fetched .*etag "v2"/m);
        // Without --ecosystem, the CLI fetches what the images in the server's KV need.
        const elsewhere = join(adv, "..", `${adv.split("/").pop()}-cli`);
        try {
          const f = await runCli(s, "advisories", ["fetch", "--dir", elsewhere]);
          assert.equal(f.code, 0, f.stdout + f.stderr);
          assert.match(f.stdout, /^fetching Debian from /m);
          assert.match(f.stdout, /^Debian: updated/m);
        } finally {
          await Deno.remove(elsewhere, { recursive: true }).catch(() => {});
        }

        // Every request went to the configured source's Debian dump.
        assert.ok(src.state.log.every((l) => l.path === "/Debian/all.zip"));
      });
    } finally {
      await src.close();
      await Deno.remove(adv, { recursive: true });
    }
  },
});

Deno.test("[scan] download keys: defaults, and mistakes named by key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-advcfg-" });
  try {
    const load = async (toml: string) => {
      const p = join(dir, "c.toml");
      await Deno.writeTextFile(p, toml);
      return await loadConfigFiles([p]);
    };
    const d = (await load("")).scan;
    assert.equal(d.advisoriesUrl, "https://osv-vulnerabilities.storage.googleapis.com");
    assert.equal(d.refreshIntervalSecs, null, "a config file downloads nothing unless asked");
    assert.deepEqual(d.advisoriesEcosystems, []);
    const set = (await load(
      `[scan]\nadvisories_dir = "a"\nrefresh_interval_secs = 60\nadvisories_url = "http://m.lan/osv/"\nadvisories_ecosystems = ["npm", "Rocky Linux"]\nadvisories_ca_bundle = "ca.pem"\n`,
    )).scan;
    assert.equal(set.refreshIntervalSecs, 60);
    assert.equal(set.advisoriesUrl, "http://m.lan/osv/");
    assert.deepEqual(set.advisoriesEcosystems, ["npm", "Rocky Linux"]);
    assert.equal(set.advisoriesCaBundle, "ca.pem");
    assert.equal((await load(`[scan]\nadvisories_url = ""\n`)).scan.advisoriesUrl, "");
    for (
      const [toml, why] of [
        [
          `[scan]\nrefresh_interval_secs = 60\n`,
          /scan\.refresh_interval_secs: needs scan\.advisories_dir/,
        ],
        [`[scan]\nadvisories_url = "ftp://x"\n`, /scan\.advisories_url: must be an http\(s\) URL/],
        [
          `[scan]\nadvisories_ecosystems = ["../etc"]\n`,
          /scan\.advisories_ecosystems\[0\]: "\.\.\/etc" is not/,
        ],
        [`[scan]\nadvisories_ecosystems = ["Debian:12"]\n`, /scan\.advisories_ecosystems\[0\]/],
        [
          `[scan]\nadvisories_dir = "a"\nrefresh_interval_secs = 0\n`,
          /scan\.refresh_interval_secs: must be an integer from 1/,
        ],
      ] as const
    ) {
      await assert.rejects(load(toml), (e: Error) => {
        assert.ok(e instanceof ConfigError, String(e));
        assert.match(e.message, why);
        return true;
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
