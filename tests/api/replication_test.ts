// Replication between Wharf processes (issue: replication): pushes, tag moves and deletes reach
// the downstream byte-exact with their LWW timestamps; two sites replicating to each other
// converge and settle (no ping-pong); 401/403 dead-letters at once, an immutable tag retries
// then dead-letters and a retry succeeds once cleared; a stopped downstream loses nothing;
// reconcile restores a wiped downstream and --dry-run changes nothing.
import assert from "node:assert/strict";
import { hashPassword } from "../../lib/auth/mod.ts";
import { freePort } from "../e2e/_distribution.ts";
import { runCli, startServer, type TestServer, withServer } from "../helpers/server.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import {
  descOf,
  imageIndex,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_INDEX,
  OCI_LAYER,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";
import { pushBlob } from "../helpers/server.ts";

// The retry budget (~19 s) must outlast the outage step (100 pushes, then the downstream's
// restart) on a loaded CI machine: with 8 attempts capped at 1 s (~4.5 s) jobs dead-lettered
// before it was back.
const FAST = `
[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 100
backoff_max_ms = 2000
max_attempts = 14
`;

function downstream(name: string, url: string, extra = ""): string {
  return `
[[repository."app".downstream]]
name = "${name}"
url = "${url}"
connect_timeout_secs = 2
read_timeout_secs = 5
${extra}
`;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function pushImage(s: TestServer, ns: string, tag: string, label = "img") {
  const cfg = jsonBytes({ os: "linux", label, nonce: crypto.randomUUID() });
  const layer = unique(`${label} layer `.repeat(1000));
  await pushBlob(s.url, ns, cfg);
  await pushBlob(s.url, ns, layer);
  const body = imageManifest(await descOf(OCI_CONFIG, cfg), [await descOf(OCI_LAYER, layer)]);
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": OCI_MANIFEST },
  });
  assert.equal(r.status, 201, await r.text());
  return { body, digest: r.headers.get("docker-content-digest")!, cfg, layer };
}

type Image = Awaited<ReturnType<typeof pushImage>>;

async function digestOf(s: TestServer, ns: string, ref: string): Promise<string | null> {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    method: "HEAD",
    headers: { accept: `${OCI_MANIFEST}, ${OCI_INDEX}` },
  });
  await r.body?.cancel();
  return r.status === 200 ? r.headers.get("docker-content-digest") : null;
}

async function jobs(s: TestServer, set: "list" | "failed") {
  const body = await (await req(s, `/v2/_svc/jobs/${set}?queue=replication&n=1000`)).json();
  return (set === "list" ? body.jobs : body.failed) as Record<string, unknown>[];
}

const settled = (s: TestServer) => async () => (await jobs(s, "list")).length === 0;

Deno.test(
  "replication: pushes, tag moves, indexes, referrers and deletes reach the downstream",
  serverTestOpts,
  async (t) => {
    await withServer({ config: FAST }, async (b) => {
      await withServer({ config: FAST + downstream("b", b.url) }, async (a) => {
        await t.step(
          "a push arrives byte-exact with its blobs and the tag's timestamp",
          async () => {
            const img = await pushImage(a, "app/web", "v1");
            await until(
              "replication",
              async () => await digestOf(b, "app/web", "v1") === img.digest,
            );
            const m = await req(b, "/v2/app/web/manifests/v1");
            assert.deepEqual(await bytesOf(m), img.body);
            for (const blob of [img.cfg, img.layer]) {
              const d = (await descOf(OCI_LAYER, blob)).digest;
              const r = await req(b, `/v2/app/web/blobs/${d}`);
              assert.deepEqual(await bytesOf(r), blob);
            }
            // The downstream's tag carries a replication timestamp: an older replicated write
            // loses to it (SPEC Manifests rule 2).
            const old = await req(b, "/v2/app/web/manifests/v1", {
              method: "PUT",
              body: img.body as BodyInit,
              headers: {
                "content-type": OCI_MANIFEST,
                "x-svc-source-timestamp": "2001-01-01T00:00:00Z",
              },
            });
            assert.equal(old.status, 409);
            assert.match(await old.text(), /REPLICATION_SUPERSEDED/);
          },
        );
        await t.step(
          "a tag move pushes the current digest; other namespaces outside app are not replicated",
          async () => {
            const v2 = await pushImage(a, "app/web", "v1", "second");
            await until("the move", async () => await digestOf(b, "app/web", "v1") === v2.digest);
            await pushImage(a, "other/x", "v1");
            await until("jobs to settle", settled(a));
            assert.equal(await digestOf(b, "other/x", "v1"), null);
          },
        );
        await t.step("an index with its children and a referrer pushed by digest", async () => {
          const amd = await pushImage(a, "app/multi", "amd");
          const arm = await pushImage(a, "app/multi", "arm");
          const index = imageIndex([
            {
              mediaType: OCI_MANIFEST,
              digest: amd.digest,
              size: amd.body.length,
              platform: { os: "linux", architecture: "amd64" },
            },
            {
              mediaType: OCI_MANIFEST,
              digest: arm.digest,
              size: arm.body.length,
              platform: { os: "linux", architecture: "arm64" },
            },
          ]);
          const r = await req(a, "/v2/app/multi/manifests/all", {
            method: "PUT",
            body: index as BodyInit,
            headers: { "content-type": OCI_INDEX },
          });
          assert.equal(r.status, 201);
          const idx = r.headers.get("docker-content-digest")!;
          const cfg = jsonBytes({ sbom: true });
          await pushBlob(a.url, "app/multi", cfg);
          const ref = imageManifest(await descOf(OCI_CONFIG, cfg), [], {
            artifactType: "application/vnd.example.sbom",
            subject: { mediaType: OCI_INDEX, digest: idx, size: index.length },
          });
          const refDigest = (await descOf(OCI_MANIFEST, ref)).digest;
          const rr = await req(a, `/v2/app/multi/manifests/${refDigest}`, {
            method: "PUT",
            body: ref as BodyInit,
            headers: { "content-type": OCI_MANIFEST },
          });
          assert.equal(rr.status, 201);
          await until("the index", async () => await digestOf(b, "app/multi", "all") === idx);
          await until("jobs to settle", settled(a));
          assert.equal(await digestOf(b, "app/multi", amd.digest), amd.digest);
          const refs = await (await req(b, `/v2/app/multi/referrers/${idx}`)).json();
          assert.deepEqual(refs.manifests.map((m: { digest: string }) => m.digest), [refDigest]);
        });
        await t.step("tag and digest deletes propagate", async () => {
          const img = await pushImage(a, "app/del", "t1");
          await pushImage(a, "app/del", "t2");
          await until("both tags", async () => (await digestOf(b, "app/del", "t2")) !== null);
          const d1 = await req(a, "/v2/app/del/manifests/t2", { method: "DELETE" });
          assert.equal(d1.status, 202);
          const d2 = await req(a, `/v2/app/del/manifests/${img.digest}`, { method: "DELETE" });
          assert.equal(d2.status, 202);
          await until("deletes", async () =>
            (await digestOf(b, "app/del", "t2")) === null &&
            (await digestOf(b, "app/del", img.digest)) === null);
          await until("jobs to settle", settled(a));
          assert.deepEqual(await jobs(a, "failed"), []);
        });
        await t.step("metrics count outcomes per downstream", async () => {
          const text = await (await req(a, "/metrics")).text();
          assert.match(
            text,
            /wharf_replication_jobs_total\{downstream="b",outcome="pushed"\} [1-9]/,
          );
          assert.match(
            text,
            /wharf_replication_jobs_total\{downstream="b",outcome="deleted"\} [1-9]/,
          );
          assert.match(text, /wharf_replication_bytes_total\{downstream="b"\} [1-9]/);
          assert.match(text, /wharf_replication_lag_seconds\{downstream="b"\} 0\n/);
        });
      });
    });
  },
);

Deno.test(
  "replication: two sites replicating to each other converge and settle",
  serverTestOpts,
  async () => {
    const [pa, pb] = [freePort(), freePort()];
    const a = await startServer({
      port: pa,
      config: FAST + downstream("b", `http://127.0.0.1:${pb}`),
    });
    const b = await startServer({
      port: pb,
      config: FAST + downstream("a", `http://127.0.0.1:${pa}`),
    });
    try {
      // Content both sides have, then 50 concurrent tag moves split over both sides.
      const imgs: Image[] = [];
      for (let i = 0; i < 5; i++) imgs.push(await pushImage(i % 2 ? a : b, "app/lww", `seed${i}`));
      await until("seeds", async () =>
        (await digestOf(a, "app/lww", "seed4")) !== null &&
        (await digestOf(b, "app/lww", "seed3")) !== null);
      await until("a settles", settled(a));
      await until("b settles", settled(b));
      const tags = ["t0", "t1", "t2"];
      await Promise.all(Array.from({ length: 50 }, async (_, i) => {
        const site = i % 2 ? a : b;
        const img = imgs[i % imgs.length];
        const r = await req(site, `/v2/app/lww/manifests/${tags[i % tags.length]}`, {
          method: "PUT",
          body: img.body as BodyInit,
          headers: { "content-type": OCI_MANIFEST },
        });
        assert.equal(r.status, 201);
        await r.body?.cancel();
      }));
      await until(
        "both sides settle",
        async () => (await settled(a)()) && (await settled(b)()),
        30_000,
      );
      for (const tag of tags) {
        const [da, db] = [await digestOf(a, "app/lww", tag), await digestOf(b, "app/lww", tag)];
        assert.ok(da !== null);
        assert.equal(da, db, `tag ${tag} converged`);
      }
      // Settled means settled: nothing is re-enqueued afterwards.
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual(await jobs(a, "list"), []);
      assert.deepEqual(await jobs(b, "list"), []);
      assert.deepEqual(await jobs(a, "failed"), []);
      assert.deepEqual(await jobs(b, "failed"), []);
    } finally {
      await a.stop();
      await b.stop();
    }
  },
);

Deno.test(
  "replication: refusals dead-letter, immutable tags retry, a stopped downstream loses nothing",
  serverTestOpts,
  async (t) => {
    const ALICE = { username: "alice", password: "alice-pw" };
    const bPort = freePort();
    const bConfig = `${FAST}
[auth.identity.alice]
username = "${ALICE.username}"
password = "${await hashPassword(ALICE.password)}"
[global.access_policy]
default = "deny"
rules = ['has(identity.username) && identity.username == "alice"', 'request.action in ["healthz", "readyz"]']
[repository."app/locked"]
immutable_tags = true
`;
    let b = await startServer({ port: bPort, config: bConfig });
    const creds = `username = "${ALICE.username}"\npassword = "${ALICE.password}"`;
    const aConfig = FAST + downstream("b", b.url, creds) +
      `\n[[repository."bad".downstream]]\nname = "nocreds"\nurl = "${b.url}"\nconnect_timeout_secs = 2\n`;
    try {
      await withServer({ config: aConfig }, async (a) => {
        const basic = { authorization: `Basic ${btoa(`${ALICE.username}:${ALICE.password}`)}` };
        const bDigest = async (ns: string, tag: string) => {
          const r = await fetch(`${b.url}/v2/${ns}/manifests/${tag}`, {
            method: "HEAD",
            headers: { ...basic, accept: OCI_MANIFEST },
          });
          await r.body?.cancel();
          return r.status === 200 ? r.headers.get("docker-content-digest") : null;
        };
        await t.step(
          "credentials work; a downstream answering 401 dead-letters at once",
          async () => {
            const img = await pushImage(a, "app/ok", "v1");
            await until("replication", async () => await bDigest("app/ok", "v1") === img.digest);
            await pushImage(a, "bad/x", "v1");
            await until("the dead letter", async () => (await jobs(a, "failed")).length === 1);
            const [f] = await jobs(a, "failed");
            assert.equal(f.attempts, 1);
            assert.match(String(f.last_error), /downstream nocreds .*(401|credentials)/);
          },
        );
        await t.step(
          "an immutable tag downstream: retried, dead-lettered, then retried by hand",
          async () => {
            // The downstream already holds app/locked:v1 with other content.
            const other = jsonBytes({ other: true });
            const put = await fetch(
              `${b.url}/v2/app/locked/blobs/uploads/?digest=${
                (await descOf(OCI_CONFIG, other)).digest
              }`,
              { method: "POST", body: other as BodyInit, headers: basic },
            );
            assert.equal(put.status, 201, await put.text());
            const mine = imageManifest(await descOf(OCI_CONFIG, other), []);
            const r = await fetch(`${b.url}/v2/app/locked/manifests/v1`, {
              method: "PUT",
              body: mine as BodyInit,
              headers: { ...basic, "content-type": OCI_MANIFEST },
            });
            assert.equal(r.status, 201, await r.text());
            await pushImage(a, "app/locked", "v1");
            await until(
              "the dead letter",
              async () =>
                (await jobs(a, "failed")).some((j) => j.lock_key === "push|b|app/locked:v1"),
              40_000,
            );
            const f = (await jobs(a, "failed")).find((j) => j.lock_key === "push|b|app/locked:v1")!;
            assert.equal(f.attempts, 14, "retried up to max_attempts");
            assert.match(String(f.last_error), /409.*DENIED/);
            // An immutable tag cannot be deleted downstream either (issue 35): clear the
            // conflict by making the repository mutable there, then retry the job.
            const del = await fetch(`${b.url}/v2/app/locked/manifests/v1`, {
              method: "DELETE",
              headers: basic,
            });
            assert.equal(del.status, 409);
            assert.match(await del.text(), /DENIED/);
            await b.stop();
            b = await startServer({
              port: bPort,
              config: bConfig.replace("immutable_tags = true", "immutable_tags = false"),
              dataDir: b.dataDir,
            });
            const retry = await req(
              a,
              `/v2/_svc/jobs/failed?queue=replication&key=${f.storage_key}`,
              { method: "POST" },
            );
            assert.equal(retry.status, 204);
            await until(
              "the retried push",
              async () =>
                await digestOf(a, "app/locked", "v1") === await bDigest("app/locked", "v1"),
            );
          },
        );
        await t.step(
          "downstream stopped during 100 pushes: jobs back off, everything arrives once",
          async () => {
            await b.stop();
            const pushed: Image[] = [];
            for (let i = 0; i < 100; i++) {
              pushed.push(await pushImage(a, "app/outage", `t${i}`, `o${i}`));
            }
            await new Promise((r) => setTimeout(r, 300));
            b = await startServer({ port: bPort, config: bConfig, dataDir: b.dataDir });
            await until("every tag", async () => {
              for (let i = 0; i < 100; i++) {
                if (await bDigest("app/outage", `t${i}`) !== pushed[i].digest) return false;
              }
              return true;
            }, 60_000);
            await until("jobs to settle", settled(a));
            const failed = (await jobs(a, "failed")).filter((j) =>
              String(j.lock_key).includes("outage")
            );
            assert.deepEqual(failed, []);
          },
        );
      });
    } finally {
      await b.stop();
    }
  },
);

Deno.test(
  "replication: reconcile restores a wiped downstream; --dry-run changes nothing",
  serverTestOpts,
  async () => {
    await withServer({ config: FAST }, async (b) => {
      // mode = reconcile: writes enqueue nothing, only reconcile does.
      await withServer({
        config: FAST + downstream("b", b.url, 'mode = "reconcile"\nprune = true'),
      }, async (a) => {
        const imgs: Image[] = [];
        for (let i = 0; i < 3; i++) imgs.push(await pushImage(a, "app/rec", `t${i}`));
        assert.deepEqual(await jobs(a, "list"), [], "reconcile mode: no event jobs");
        // The downstream has an extra tag the source lacks (pruned).
        await pushImage(b, "app/rec", "stray");
        const dry = await runCli(a, "replicate", ["--dry-run"]);
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(dry.stdout, /would push app\/rec:t0 -> b/);
        assert.match(dry.stdout, /would delete b app\/rec:stray/);
        assert.match(dry.stdout, /would enqueue 3 push\(es\) and 1 delete/);
        assert.deepEqual(await jobs(a, "list"), [], "--dry-run enqueues nothing");
        assert.equal(await digestOf(b, "app/rec", "t0"), null);
        const run = await runCli(a, "replicate");
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stdout, /enqueued 3 push\(es\) and 1 delete/);
        await until("reconciled", async () => {
          for (let i = 0; i < 3; i++) {
            if (await digestOf(b, "app/rec", `t${i}`) !== imgs[i].digest) return false;
          }
          return await digestOf(b, "app/rec", "stray") === null;
        });
        await until("jobs to settle", settled(a));
        const again = await runCli(a, "replicate", ["--dry-run"]);
        assert.match(again.stdout, /would enqueue 0 push\(es\) and 0 delete/);
      });
    });
  },
);

Deno.test("replication: config errors stop startup naming the key", async () => {
  const s = startServer({
    config: `[[repository."a".downstream]]\nname = "x"\nurl = "ftp://nope"\n`,
  });
  await assert.rejects(s, /repository\."a"\.downstream\[0\]\.url: must be an http/);
});
