// Advisory downloads offline (issue 37 item 4): a source nobody answers on (a closed port as
// [scan] advisories_url) gives one warn line with the cause and the next attempt's time, not a
// log line per queue retry; `advisories status` says the same, and so does an image's report
// (`advisory_download`, what the UI's note reads).
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

/** A port nothing listens on: connecting is refused at once. */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

function logLines(s: TestServer): LogLine[] {
  return s.output().split("\n").filter((l) => l.startsWith("{")).map((l) => {
    try {
      return JSON.parse(l) as LogLine;
    } catch {
      return { level: "", msg: l };
    }
  });
}

async function until<T>(what: string, s: TestServer, f: () => Promise<T | null> | T | null) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const v = await f();
    if (v) return v;
    assert.ok(Date.now() < deadline, `${what}: timed out\n${s.output().slice(-4000)}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n';
const STATUS = "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
  "Version: 3.0.11-1~deb12u1\n";

Deno.test({
  ...serverTestOpts,
  name:
    "advisories offline: one warn line with the cause and the next attempt, the same in advisories status and the report",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-advoffline-" });
    const url = `http://127.0.0.1:${closedPort()}`;
    try {
      await withServer({
        config: `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 200
max_attempts = 5
[scan]
advisories_dir = ${JSON.stringify(adv)}
advisories_url = ${JSON.stringify(url)}
advisories_ecosystems = ["Debian", "Alpine"]
refresh_interval_secs = 86400
reload_interval_secs = 1
`,
      }, async (s) => {
        const started = Date.now();
        const failed = (l: LogLine) => l.msg.startsWith("advisory download failed:");
        const warn = await until("the warn line", s, () => logLines(s).find(failed) ?? null);
        assert.equal(warn.level, "warn");
        // The cause, both ecosystems named once (they failed alike), and the next attempt: the
        // first retry pause (15 minutes) after the run started.
        assert.match(warn.msg, /^advisory download failed: Alpine, Debian: .*Connection refused/);
        const m = / next attempt at (\S+)$/.exec(warn.msg);
        assert.ok(m, warn.msg);
        assert.equal(warn.next_attempt, m[1]);
        const next = Date.parse(m[1]);
        const pause = next - started;
        assert.ok(pause > 14 * 60_000 && pause <= 15 * 60_000 + 5_000, `next in ${pause} ms`);

        // A Debian image is scanned meanwhile: its ecosystem was tried, so no run is asked for.
        const img = await pushTarImage(s.url, "off/deb", "v1", [
          tarOf([
            { path: "etc/os-release", data: OS_RELEASE },
            { path: "var/lib/dpkg/status", data: STATUS },
          ]),
        ]);
        const report = await until("the report", s, async () => {
          const r = await req(s, `/v2/off/deb/_svc/vulnerabilities/${img.digest}`);
          if (r.status !== 200) {
            await r.body?.cancel();
            return null;
          }
          return await r.json();
        });
        assert.equal(report.vulnerabilities_checked, false);
        assert.deepEqual(report.advisory_download, {
          message: warn.msg,
          failed: report.advisory_download.failed,
          failed_at: report.advisory_download.failed_at,
          next_attempt_at: m[1],
        });
        assert.deepEqual(
          report.advisory_download.failed.map((f: { ecosystem: string }) => f.ecosystem),
          ["Alpine", "Debian"],
        );

        // Still that one line, no queue retries, nothing dead-lettered.
        await new Promise((res) => setTimeout(res, 2000));
        const lines = logLines(s);
        assert.equal(lines.filter(failed).length, 1, s.output().slice(-4000));
        assert.deepEqual(
          lines.filter((l) => /advisor/i.test(JSON.stringify(l)) && l.level === "info"),
          [],
          "no info line about the download",
        );
        assert.equal(
          lines.filter((l) => l.msg === "job failed, will retry" && l.kind === "fetch-advisories")
            .length,
          0,
        );
        const dead = await (await req(s, "/v2/_svc/jobs/failed?queue=scan")).json();
        assert.deepEqual(dead.failed, []);

        // `advisories status` says the same sentence.
        const st = await runCli(s, "advisories", ["status"]);
        assert.equal(st.code, 0, st.stderr);
        assert.ok(st.stdout.split("\n").includes(warn.msg), st.stdout);
        assert.match(st.stdout, /^last download run: .*failed Alpine, Debian$/m);
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});
