// Rate limits (issue 26, part 3; docs/operations.md "Rate limits") against real Wharf processes:
// two `serve` processes on one KV file share an identity's pull bucket (429 TOOMANYREQUESTS
// with Retry-After and Docker Hub's ratelimit-* headers) while another identity pulls on;
// anonymous clients are limited per client IP with trusted proxies honoured; exemptions by
// identity and by CEL rule; the requests-per-second bucket and per-repository overrides; and
// nothing changes when unconfigured.
import assert from "node:assert/strict";
import { assertError, req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, startServer, type TestServer, withServer } from "../helpers/server.ts";
import { identityTables } from "../helpers/identities.ts";

const PASSWORDS = { alice: "alice-pw-3b7e01", bob: "bob-pw-5d2a77", ci: "ci-pw-88aa01" };
const basic = (user: keyof typeof PASSWORDS) => ({
  authorization: `Basic ${btoa(`${user}:${PASSWORDS[user]}`)}`,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pull(
  s: TestServer,
  ns: string,
  ref: string,
  headers: Record<string, string> = {},
  method = "GET",
): Promise<Response> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    method,
    headers: { accept: "application/vnd.oci.image.manifest.v1+json", ...headers },
  });
  if (r.status !== 429) await r.body?.cancel();
  return r;
}

function remaining(r: Response): string | null {
  return r.headers.get("ratelimit-remaining");
}

Deno.test({
  name: "pulls_per_hour: one identity limited across two processes on one KV, another not",
  ...serverTestOpts,
  async fn() {
    const config = `${await identityTables(PASSWORDS)}
[global.rate_limit]
pulls_per_hour = 4
sync_interval_ms = 50
`;
    const a = await startServer({ config });
    let b: TestServer | null = null;
    try {
      b = await startServer({ config, dataDir: a.dataDir });
      await pushImage(a.url, "team/app", "v1");
      // Alternating processes, each pull well after the other process settled (interval 50 ms):
      // the counts are exact.
      const seen: (string | null)[] = [];
      for (const [i, s] of [a, b, a, b].entries()) {
        const r = await pull(s, "team/app", "v1", basic("alice"));
        assert.equal(r.status, 200, `alice pull ${i + 1}`);
        assert.equal(r.headers.get("ratelimit-limit"), "4;w=3600");
        seen.push(remaining(r));
        await sleep(300);
      }
      assert.deepEqual(seen, ["3;w=3600", "2;w=3600", "1;w=3600", "0;w=3600"]);
      for (const s of [a, b]) {
        const r = await pull(s, "team/app", "v1", basic("alice"));
        assert.equal(r.status, 429);
        // One token comes back every 3600/4 = 900 s; the bucket emptied under a second ago.
        const retry = Number(r.headers.get("retry-after"));
        assert.ok(retry > 890 && retry <= 900, `Retry-After ${retry}`);
        assert.equal(r.headers.get("ratelimit-limit"), "4;w=3600");
        assert.equal(remaining(r), "0;w=3600");
        const body = await r.json();
        assert.equal(body.errors[0].code, "TOOMANYREQUESTS");
        assert.match(body.errors[0].detail, /4 manifest pulls per hour/);
        assert.match(
          body.errors[0].message,
          /^pull rate limit reached: 4 manifest pulls per hour for this identity; retry in \d+ s$/,
        );
      }
      // HEAD is not a pull (Docker Hub's count) but shows the figures.
      for (const s of [a, b]) {
        const head = await pull(s, "team/app", "v1", basic("alice"), "HEAD");
        assert.equal(head.status, 200);
        assert.equal(remaining(head), "0;w=3600");
      }
      // Blobs are not pulls.
      const blobs = await req(a, "/v2/team/app/tags/list", { headers: basic("alice") });
      await blobs.body?.cancel();
      assert.equal(blobs.status, 200);
      // A HEAD on a process that never saw bob reads the shared count: still full.
      const peek = await pull(b, "team/app", "v1", basic("bob"), "HEAD");
      assert.equal(remaining(peek), "4;w=3600");
      // bob is unaffected on both processes.
      for (const s of [a, b]) {
        const r = await pull(s, "team/app", "v1", basic("bob"));
        assert.equal(r.status, 200);
        assert.equal(remaining(r), s === a ? "3;w=3600" : "2;w=3600");
        await sleep(300);
      }
      // The refusals were counted.
      const m = await (await req(a, "/metrics")).text();
      assert.match(m, /wharf_rate_limited_requests_total\{class="pulls"\} 1\b/);
      assert.match(m, /wharf_rate_limit_kv_operations_total\{op="commits"\} \d+/);
    } finally {
      await b?.stop();
      await a.stop();
      await Deno.remove(a.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "concurrent pulls on two processes: over-admission stays within the documented bound",
  ...serverTestOpts,
  async fn() {
    const config = `${await identityTables(PASSWORDS)}
[global.rate_limit]
pulls_per_hour = 10
sync_interval_ms = 100
`;
    const a = await startServer({ config });
    let b: TestServer | null = null;
    try {
      b = await startServer({ config, dataDir: a.dataDir });
      await pushImage(a.url, "team/app", "v1");
      // 40 pulls at once, half on each process: each may admit from the same 10 tokens
      // (P × capacity = 20), never more; every admitted pull is charged.
      const all = await Promise.all(
        Array.from(
          { length: 40 },
          (_, i) => pull(i % 2 ? a : b!, "team/app", "v1", basic("alice")),
        ),
      );
      for (const r of all) if (r.status === 429) await r.body?.cancel();
      const ok = all.filter((r) => r.status === 200).length;
      assert.ok(ok >= 10 && ok <= 20, `admitted ${ok}`);
      await sleep(400);
      // Settled: both processes now refuse.
      for (const s of [a, b]) {
        const r = await pull(s, "team/app", "v1", basic("alice"));
        assert.equal(r.status, 429);
        await r.body?.cancel();
      }
    } finally {
      await b?.stop();
      await a.stop();
      await Deno.remove(a.dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "anonymous clients are limited per client IP; X-Forwarded-For only from a trusted proxy",
  ...serverTestOpts,
  async fn() {
    await withServer({
      server: 'trusted_proxies = ["127.0.0.1/32"]',
      config: `[global.rate_limit]\npulls_per_hour = 2\n`,
    }, async (s) => {
      await pushImage(s.url, "pub/app", "v1");
      const from = (ip: string) => ({ "x-forwarded-for": ip });
      for (let i = 0; i < 2; i++) {
        assert.equal((await pull(s, "pub/app", "v1", from("203.0.113.7"))).status, 200);
      }
      const r = await pull(s, "pub/app", "v1", from("203.0.113.7"));
      await assertError(r, 429, "TOOMANYREQUESTS");
      assert.ok(Number(r.headers.get("retry-after")) > 1700);
      // Another client behind the same proxy has its own bucket.
      const other = await pull(s, "pub/app", "v1", from("203.0.113.8"));
      assert.equal(other.status, 200);
      assert.equal(remaining(other), "1;w=3600");
      // The proxy's own address (no X-Forwarded-For) is a third client.
      assert.equal((await pull(s, "pub/app", "v1")).status, 200);
    });
    // Untrusted peer: X-Forwarded-For is ignored, every request counts for 127.0.0.1.
    await withServer({ config: `[global.rate_limit]\npulls_per_hour = 2\n` }, async (s) => {
      await pushImage(s.url, "pub/app", "v1");
      assert.equal(
        (await pull(s, "pub/app", "v1", { "x-forwarded-for": "198.51.100.1" })).status,
        200,
      );
      assert.equal(
        (await pull(s, "pub/app", "v1", { "x-forwarded-for": "198.51.100.2" })).status,
        200,
      );
      const r = await pull(s, "pub/app", "v1", { "x-forwarded-for": "198.51.100.3" });
      await assertError(r, 429, "TOOMANYREQUESTS");
    });
  },
});

Deno.test({
  name:
    "exemptions by identity and by CEL rule; requests_per_second with burst; repository override",
  ...serverTestOpts,
  async fn() {
    const config = `${await identityTables(PASSWORDS)}
[global.rate_limit]
pulls_per_hour = 1
requests_per_second = 1
burst = 3
exempt_identities = ["ci"]
exempt_rules = ['has(identity.username) && identity.username == "bob" && request.action == "get-manifest"']

[repository."open"]
[repository."open".rate_limit]
pulls_per_hour = 0
requests_per_second = 0
`;
    await withServer({ config }, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      await pushImage(s.url, "open/app", "v1");
      // ci: exempt by identity, no headers at all.
      for (let i = 0; i < 6; i++) {
        const r = await pull(s, "team/app", "v1", basic("ci"));
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("ratelimit-limit"), null);
      }
      // bob: manifest GETs exempt by the rule.
      for (let i = 0; i < 5; i++) {
        assert.equal((await pull(s, "team/app", "v1", basic("bob"))).status, 200);
      }
      // ...but his other requests are not: burst 3 at 1/s.
      const tags = () => req(s, "/v2/team/app/tags/list", { headers: basic("bob") });
      // Six at once (well within a second, so at most one token comes back meanwhile).
      const t0 = Date.now();
      const answers = await Promise.all(Array.from({ length: 6 }, tags));
      const took = Date.now() - t0;
      const statuses = answers.map((r) => r.status).sort();
      for (const r of answers) {
        if (r.status === 429) {
          assert.equal(r.headers.get("retry-after"), "1");
          const body = await r.json();
          assert.match(body.errors[0].detail, /1 requests per second \(burst 3\)/);
        } else await r.body?.cancel();
      }
      const passed = statuses.filter((x) => x === 200).length;
      assert.ok(passed === 3 || (passed === 4 && took >= 1000), `${statuses} in ${took} ms`);
      assert.equal(statuses.filter((x) => x !== 200 && x !== 429).length, 0, `${statuses}`);
      await sleep(1100);
      const again = await tags();
      await again.body?.cancel();
      assert.equal(again.status, 200, "a token came back after a second");
      // alice: one pull an hour in team/, none in open/ (the override lifts both limits).
      assert.equal((await pull(s, "team/app", "v1", basic("alice"))).status, 200);
      await assertError(await pull(s, "team/app", "v1", basic("alice")), 429, "TOOMANYREQUESTS");
      for (let i = 0; i < 6; i++) {
        const r = await pull(s, "open/app", "v1", basic("alice"));
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("ratelimit-limit"), null);
      }
      // Probes are never limited.
      for (let i = 0; i < 6; i++) {
        const r = await req(s, "/healthz");
        await r.body?.cancel();
        assert.equal(r.status, 200);
      }
    });
  },
});

Deno.test({
  name: "unconfigured: no headers, no limit, no KV keys",
  ...serverTestOpts,
  async fn() {
    await withServer({}, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      for (let i = 0; i < 30; i++) {
        const r = await pull(s, "team/app", "v1");
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("ratelimit-limit"), null);
        assert.equal(r.headers.get("ratelimit-remaining"), null);
      }
      const m = await (await req(s, "/metrics")).text();
      assert.doesNotMatch(m, /wharf_rate_limit_kv_operations_total\{/);
    });
  },
});

Deno.test({
  name: "bad [rate_limit] config stops startup naming the key",
  ...serverTestOpts,
  async fn() {
    const cases: [string, RegExp][] = [
      [
        '[global.rate_limit]\npulls_per_hour = "100"\n',
        /global\.rate_limit\.pulls_per_hour: must be an integer/,
      ],
      [
        "[global.rate_limit]\nrequests_per_second = -1\n",
        /global\.rate_limit\.requests_per_second: must be an integer from 0/,
      ],
      ["[global.rate_limit]\nburst = 0\n", /global\.rate_limit\.burst: must be an integer from 1/],
      [
        "[global.rate_limit]\npulls_per_hours = 10\n",
        /global\.rate_limit\.pulls_per_hours: unknown key/,
      ],
      [
        '[global.rate_limit]\nexempt_identities = "ci"\n',
        /global\.rate_limit\.exempt_identities: must be an array of strings/,
      ],
      [
        "[global.rate_limit]\nexempt_rules = ['identity.username ==']\n",
        /global\.rate_limit\.exempt_rules\[0\]/,
      ],
      ["[global]\nrate_limit = 5\n", /global\.rate_limit: must be a table/],
      [
        '[repository."team".rate_limit]\nsync_interval_ms = 100\n',
        /repository\."team"\.rate_limit\.sync_interval_ms: unknown key/,
      ],
      [
        '[repository."team".rate_limit]\npulls_per_hour = 1.5\n',
        /repository\."team"\.rate_limit\.pulls_per_hour: must be an integer/,
      ],
    ];
    for (const [config, want] of cases) {
      await assert.rejects(
        () => withServer({ config }, () => Promise.resolve()),
        (e: Error) => {
          assert.match(e.message, want, config);
          return true;
        },
      );
    }
  },
});

Deno.test({
  name: "reload: limits and exemption rules change live; a broken rule is refused naming the key",
  ...serverTestOpts,
  async fn() {
    await withServer({}, async (s) => {
      const base = await Deno.readTextFile(s.configPath);
      const reloads = () => (s.output().match(/"msg":"config reload(ed| refused)/g) ?? []).length;
      const rewrite = async (extra: string) => {
        const before = reloads();
        await Deno.writeTextFile(`${s.configPath}.tmp`, base + extra);
        await Deno.rename(`${s.configPath}.tmp`, s.configPath);
        const end = Date.now() + 10_000;
        while (reloads() <= before) {
          if (Date.now() > end) assert.fail(`no reload:\n${s.output().slice(-2000)}`);
          await sleep(50);
        }
      };
      await pushImage(s.url, "team/app", "v1");
      assert.equal((await pull(s, "team/app", "v1")).status, 200);
      await rewrite(`[global.rate_limit]\npulls_per_hour = 1\n`);
      assert.equal((await pull(s, "team/app", "v1")).status, 200);
      await assertError(await pull(s, "team/app", "v1"), 429, "TOOMANYREQUESTS");
      await rewrite(
        `[global.rate_limit]\npulls_per_hour = 1\nexempt_rules = ['request.namespace == "team/app"']\n`,
      );
      assert.equal((await pull(s, "team/app", "v1")).status, 200, "exempt now");
      await rewrite(`[global.rate_limit]\npulls_per_hour = 1\nexempt_rules = ['request.(']\n`);
      assert.match(s.output(), /global\.rate_limit\.exempt_rules\[0\]/);
      assert.equal((await pull(s, "team/app", "v1")).status, 200, "the running config stays");
    });
  },
});
