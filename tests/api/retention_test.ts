// Retention (issue 14): `main.ts prune [--dry-run] [--now T]` against a running server's data,
// with fixed clocks: push times are set with X-Svc-Source-Timestamp (SPEC replication rule 6:
// a backdated timestamp is the tag's creation time) and prune's clock with --now.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, runCli, startServer, type TestServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";

const DAY = 86_400_000;
const enc = new TextEncoder();
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

/** Pushes a small unique image as `ns:tag`, created `daysAgo` days ago; returns its digest. */
async function pushAged(
  s: TestServer,
  ns: string,
  tag: string,
  daysAgo: number,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const cfgBytes = enc.encode(JSON.stringify({ os: "linux", architecture: "amd64", tag, ns }));
  const config = await pushBlob(s.url, ns, cfgBytes);
  const body = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: config,
      size: cfgBytes.length,
    },
    layers: [],
    ...extra,
  });
  const headers: Record<string, string> = { "content-type": OCI_MANIFEST };
  if (daysAgo > 0) {
    headers["X-Svc-Source-Timestamp"] = new Date(Date.now() - daysAgo * DAY).toISOString();
  }
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, { method: "PUT", body, headers });
  assert.equal(r.status, 201, await r.text());
  return r.headers.get("docker-content-digest")!;
}

async function tags(s: TestServer, ns: string): Promise<string[]> {
  const r = await req(s, `/v2/${ns}/tags/list`);
  if (r.status === 404) {
    await r.body?.cancel();
    return [];
  }
  return ((await r.json()).tags ?? []).sort();
}

async function status(s: TestServer, path: string): Promise<number> {
  const r = await req(s, path);
  await r.body?.cancel();
  return r.status;
}

const iso = (ms: number) => new Date(ms).toISOString();

Deno.test(
  "prune: keep the last N pushed; dry run changes nothing; untagged manifests go too",
  serverTestOpts,
  async () => {
    await withServer({
      config: `[repository.keepn.retention_policy]\nrules = ["top_pushed(2)"]\n`,
    }, async (s) => {
      const d: Record<string, string> = {};
      for (const [i, t] of ["v1", "v2", "v3", "v4", "v5"].entries()) {
        d[t] = await pushAged(s, "keepn/app", t, 50 - i * 10);
      }
      await pushAged(s, "other/app", "old", 400); // no policy covers it
      const dry = await runCli(s, "prune", ["--dry-run"]);
      assert.equal(dry.code, 0, dry.stderr);
      for (const t of ["v1", "v2", "v3"]) {
        assert.match(dry.stdout, new RegExp(`would delete keepn/app:${t} \\(${d[t]}\\)`));
      }
      assert.doesNotMatch(dry.stdout, /keepn\/app:v4|keepn\/app:v5|other/);
      assert.match(dry.stdout, /would delete 3 tag\(s\) and 3 manifest\(s\)/);
      assert.deepEqual(await tags(s, "keepn/app"), ["v1", "v2", "v3", "v4", "v5"], "dry run");

      const run = await runCli(s, "prune");
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /kept 2, deleted 3 tag\(s\) and 3 manifest\(s\)/);
      assert.deepEqual(await tags(s, "keepn/app"), ["v4", "v5"]);
      for (const t of ["v1", "v2", "v3"]) {
        assert.equal(await status(s, `/v2/keepn/app/manifests/${d[t]}`), 404, `${t} manifest`);
      }
      assert.equal(await status(s, `/v2/keepn/app/manifests/${d.v4}`), 200);
      assert.deepEqual(await tags(s, "other/app"), ["old"]);
    });
  },
);

Deno.test(
  "prune: keep what was pulled within 30 days (fixed clock), and `latest`",
  serverTestOpts,
  async () => {
    await withServer({
      config: `
[global]
update_pull_time = true

[global.retention_policy]
rules = ['image.tag == "latest"', 'image.last_pulled_at > now() - days(30)', 'image.pushed_at > now() - hours(1)']
`,
    }, async (s) => {
      await pushAged(s, "pl/app", "latest", 300);
      await pushAged(s, "pl/app", "pulled", 100);
      await pushAged(s, "pl/app", "never", 100);
      await pushAged(s, "pl/app", "fresh", 0);
      assert.equal(await status(s, `/v2/pl/app/manifests/pulled`), 200);
      // Pull times are recorded asynchronously (group commit): wait until the listing shows it.
      for (let i = 0; i < 50; i++) {
        const r = await req(s, `/v2/pl/app/_svc/pulls/list?tag=pulled`);
        const body = await r.json();
        if ((body.entries ?? []).length > 0) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      const now = Date.now();
      // 10 days later: `pulled` was pulled 10 days ago, `fresh` is 10 days old.
      const at10 = await runCli(s, "prune", ["--now", iso(now + 10 * DAY)]);
      assert.equal(at10.code, 0, at10.stderr);
      assert.deepEqual(await tags(s, "pl/app"), ["latest", "pulled"]);
      // 40 days later: the pull is too old too; latest stays whatever its age.
      const at40 = await runCli(s, "prune", ["--now", iso(now + 40 * DAY)]);
      assert.equal(at40.code, 0, at40.stderr);
      assert.deepEqual(await tags(s, "pl/app"), ["latest"]);
    });
  },
);

Deno.test(
  "prune: index children and manifests with referrers are protected",
  serverTestOpts,
  async () => {
    await withServer({
      config: `[global.retention_policy]\nrules = ['image.tag == "keep"']\n`,
    }, async (s) => {
      const child = await pushAged(s, "pr/app", "child", 5);
      const childSize = (await (await req(s, `/v2/pr/app/manifests/${child}`)).arrayBuffer())
        .byteLength;
      const index = JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [{
          mediaType: OCI_MANIFEST,
          digest: child,
          size: childSize,
          platform: { os: "linux", architecture: "amd64" },
        }],
      });
      const ix = await req(s, `/v2/pr/app/manifests/idx`, {
        method: "PUT",
        body: index,
        headers: { "content-type": "application/vnd.oci.image.index.v1+json" },
      });
      assert.equal(ix.status, 201);
      const subject = await pushAged(s, "pr/app", "subject", 5);
      const subjectSize = (await (await req(s, `/v2/pr/app/manifests/${subject}`)).arrayBuffer())
        .byteLength;
      await pushAged(s, "pr/app", "sbom", 5, {
        artifactType: "application/spdx+json",
        subject: { mediaType: OCI_MANIFEST, digest: subject, size: subjectSize },
      });
      await pushAged(s, "pr/app", "plain", 5);
      await pushAged(s, "pr/app", "keep", 5);
      const run = await runCli(s, "prune");
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`keep pr/app:child \\(${child}\\): protected: a child`));
      assert.match(run.stdout, /keep pr\/app:subject .*: protected: has referrers/);
      assert.deepEqual(await tags(s, "pr/app"), ["child", "keep", "subject"]);
      assert.equal(await status(s, `/v2/pr/app/manifests/${child}`), 200);
    });
  },
);

Deno.test(
  "prune: deletes fire tag.delete and manifest.delete events attributed to retention",
  serverTestOpts,
  async () => {
    const rx = startReceiver();
    try {
      await withServer({
        config: `
[global.job_queue]
poll_interval_ms = 100

[global.retention_policy]
rules = ["top_pushed(1)"]

[event_webhook.audit]
url = "${rx.url}"
events = ["tag.delete", "manifest.delete"]
`,
      }, async (s) => {
        const old = await pushAged(s, "evp/app", "old", 3);
        await pushAged(s, "evp/app", "new", 1);
        const run = await runCli(s, "prune");
        assert.equal(run.code, 0, run.stderr);
        await rx.waitFor((d) => d.length >= 2);
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(
          rx.deliveries.map((d) => [d.event.kind, d.event.tag, d.event.digest]).sort(),
          [["manifest.delete", null, old], ["tag.delete", "old", old]],
        );
        assert.ok(
          rx.deliveries.every((d) =>
            (d.event.actor as { username: string }).username === "wharf-retention"
          ),
        );
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test(
  "prune: a failing rule keeps (fail-open, logged); pull-time rules without update_pull_time refuse",
  serverTestOpts,
  async () => {
    await withServer({
      config:
        `[global.retention_policy]\nrules = ['image.no_such_field == "x"', "image.last_pulled_at > now() - days(1)"]\n`,
    }, async (s) => {
      await pushAged(s, "fo/app", "a", 50);
      const refused = await runCli(s, "prune");
      assert.equal(refused.code, 2);
      assert.match(
        refused.stderr,
        /global\.retention_policy reads pull times .* global\.update_pull_time is off/,
      );
      assert.deepEqual(await tags(s, "fo/app"), ["a"]);
    });
    await withServer({
      config: `[global.retention_policy]\nrules = ['image.no_such_field == "x"']\n`,
    }, async (s) => {
      await pushAged(s, "fo/app", "a", 50);
      const run = await runCli(s, "prune");
      assert.equal(run.code, 0, run.stderr);
      assert.deepEqual(await tags(s, "fo/app"), ["a"], "kept: the rule errored");
      assert.match(run.stderr, /retention rule failed; the tag is kept/);
      assert.match(run.stderr, /global\.retention_policy\.rules\[0\]/);
      assert.match(run.stdout, /1 rule error\(s\) \(kept\)/);
    });
  },
);

Deno.test("prune on a schedule inside the server", serverTestOpts, async () => {
  await withServer({
    config: `[global.retention_policy]\nrules = ["top_pushed(1)"]\ninterval_secs = 1\n`,
  }, async (s) => {
    await pushAged(s, "sch/app", "a", 3);
    await pushAged(s, "sch/app", "b", 2);
    const end = Date.now() + 10_000;
    while (Date.now() < end && (await tags(s, "sch/app")).length > 1) {
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(await tags(s, "sch/app"), ["b"]);
    assert.match(s.output(), /prune: 1 namespace\(s\), 2 tag\(s\); kept 1, deleted 1 tag/);
  });
});

Deno.test("malformed retention rules stop startup naming the key", async () => {
  for (
    const [toml, re] of [
      [
        `[repository.x.retention_policy]\nrules = ["image.tag =="]\n`,
        /repository\."x"\.retention_policy\.rules\[0\] \(image\.tag ==\)/,
      ],
      [
        `[global.retention_policy]\nrules = "top_pushed(1)"\n`,
        /global\.retention_policy\.rules: must be an array/,
      ],
      [`[global.retention_policy]\nkeep = 3\n`, /global\.retention_policy\.keep: unknown key/],
      [
        `[global.retention_policy]\nrules = ["top_pulled(3)"]\ninterval_secs = 60\n`,
        /global\.retention_policy reads pull times/,
      ],
    ] as const
  ) {
    await assert.rejects(() => startServer({ config: toml }), (e: Error) => {
      assert.match(e.message, /server exited \(2\)/);
      assert.match(e.message, re);
      return true;
    });
  }
});
