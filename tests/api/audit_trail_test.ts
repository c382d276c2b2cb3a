// Issue 26 §4, the audit trail against a real Wharf process: a record for every client write
// and administrative act with identity, client IP, action, target, outcome and request id;
// GET /v2/_svc/audit with its filters, paging and 404 for malformed filters; nothing recorded
// or served when unconfigured; an acknowledged push has its record after a SIGKILL; bad
// [global.audit] config stops startup naming the key; long names stay within the KV limits.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, sha256Hex, startServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import {
  as,
  audit,
  auditAll,
  identities,
  POLICY,
  pushImageAs,
  type Rec,
  TOKENS,
  waitFor,
} from "./audit_helpers.ts";

const enc = new TextEncoder();

const one = (recs: Rec[], pred: (r: Rec) => boolean, what: string): Rec => {
  const found = recs.filter(pred);
  assert.equal(found.length, 1, `${what}: ${JSON.stringify(recs, null, 1)}`);
  return found[0];
};

Deno.test({
  name: "audit: every write and admin act is recorded with who, where, what and request id",
  ...serverTestOpts,
  fn: async () => {
    const config = (await identities()) + POLICY + TOKENS + `
[global.audit]
enabled = true
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 50
backoff_max_ms = 100
[event_webhook.dead]
url = "http://127.0.0.1:9/hook"
events = ["tag.delete"]
max_retries = 0
timeout_ms = 500
`;
    await withServer({ config }, async (s) => {
      const img = await pushImageAs(s, "alice", "team/app", "v1", "req-push-1");
      let recs = await auditAll(s);
      const push = one(recs, (r) => r.action === "manifest.push", "manifest.push");
      assert.equal(push.identity, "alice");
      // A username is unique within its sign-in method only: the record says which.
      assert.equal(push.provider, "basic");
      assert.equal(push.client_ip, "127.0.0.1");
      assert.equal(push.namespace, "team/app");
      assert.equal(push.reference, "v1");
      assert.equal(push.digest, img.digest);
      assert.equal(push.outcome, "ok");
      assert.equal(push.request_id, "req-push-1");
      assert.match(push.time as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const tag = one(recs, (r) => r.action === "tag.create", "tag.create");
      assert.equal(tag.request_id, "req-push-1", "the tag's record is the push's request");
      assert.equal(recs.filter((r) => r.action === "blob.push").length, 2);
      for (const r of recs) {
        assert.equal(typeof r.request_id, "string");
        assert.ok((r.request_id as string).length > 0);
      }

      // A tag moved to another digest is a tag.create too; a re-push of the same is not.
      const moved = await pushImageAs(s, "alice", "team/app", "v1");
      recs = await auditAll(s, "?action=tag.create");
      assert.equal(recs.length, 2);
      assert.equal(recs[0].digest, moved.digest, "newest first");

      // Mount of a blob into another namespace.
      let r = await req(s, `/v2/team/other/blobs/uploads/?mount=${img.layer}&from=team/app`, {
        method: "POST",
        headers: as("alice"),
      });
      await r.body?.cancel();
      assert.equal(r.status, 201);
      const mount = one(await auditAll(s, "?action=blob.mount"), () => true, "blob.mount");
      assert.equal(mount.namespace, "team/other");
      assert.equal(mount.digest, img.layer);

      // Upload cancel.
      r = await req(s, `/v2/team/app/blobs/uploads/`, { method: "POST", headers: as("alice") });
      await r.body?.cancel();
      assert.equal(r.status, 202);
      const loc = r.headers.get("location")!;
      const uuid = loc.split("/").pop()!;
      r = await req(s, loc, { method: "DELETE", headers: as("alice") });
      await r.body?.cancel();
      assert.equal(r.status, 204);
      const cancel = one(await auditAll(s, "?action=upload.cancel"), () => true, "cancel");
      assert.equal(cancel.reference, uuid);
      assert.equal(cancel.identity, "alice");

      // Token issue.
      r = await req(s, "/token?service=wharf.test", { headers: as("bob") });
      await r.body?.cancel();
      assert.equal(r.status, 200);
      const tok = one(await auditAll(s, "?action=token.issue"), () => true, "token.issue");
      assert.equal(tok.identity, "bob");

      // A denial: bob may not push.
      r = await req(s, `/v2/team/app/manifests/v2`, {
        method: "PUT",
        body: "{}",
        headers: as("bob", { "content-type": "application/vnd.oci.image.manifest.v1+json" }),
      });
      await assertErrorCode(r, 403, "DENIED");
      const denied = one(await auditAll(s, "?identity=bob&action=put-manifest"), () => true, "d");
      assert.equal(denied.outcome, "denied");
      assert.equal(denied.provider, "basic");
      assert.equal(denied.namespace, "team/app");
      assert.equal(denied.reference, "v2");
      assert.match(denied.detail as string, /DENIED/);

      // Deletes: tag, manifest, blob.
      r = await req(s, `/v2/team/app/manifests/v1`, { method: "DELETE", headers: as("alice") });
      await r.body?.cancel();
      assert.equal(r.status, 202);
      r = await req(s, `/v2/team/app/manifests/${img.digest}`, {
        method: "DELETE",
        headers: as("alice"),
      });
      await r.body?.cancel();
      assert.equal(r.status, 202);
      r = await req(s, `/v2/team/app/blobs/${img.layer}`, {
        method: "DELETE",
        headers: as("alice"),
      });
      await r.body?.cancel();
      assert.equal(r.status, 202);
      recs = await auditAll(s, "?namespace=team/app");
      assert.equal(one(recs, (x) => x.action === "tag.delete", "tag.delete").reference, "v1");
      assert.equal(
        one(recs, (x) => x.action === "manifest.delete", "manifest.delete").digest,
        img.digest,
      );
      assert.equal(one(recs, (x) => x.action === "blob.delete", "blob.delete").digest, img.layer);

      // Job retry and delete: the tag.delete event's delivery to a dead webhook is dead-lettered.
      const key = await waitFor("a dead letter", async () => {
        const j = await (await req(s, "/v2/_svc/jobs/failed?queue=events", {
          headers: as("root"),
        })).json();
        return j.failed?.[0]?.storage_key ?? null;
      });
      r = await req(s, `/v2/_svc/jobs/failed?queue=events&key=${key}`, {
        method: "POST",
        headers: as("root"),
      });
      await r.body?.cancel();
      assert.equal(r.status, 204);
      const key2 = await waitFor("the retried job dead again", async () => {
        const j = await (await req(s, "/v2/_svc/jobs/failed?queue=events", {
          headers: as("root"),
        })).json();
        return j.failed?.[0]?.storage_key ?? null;
      });
      r = await req(s, `/v2/_svc/jobs/failed?queue=events&key=${key2}`, {
        method: "DELETE",
        headers: as("root"),
      });
      await r.body?.cancel();
      assert.equal(r.status, 204);
      recs = await auditAll(s, "?identity=root");
      assert.match(one(recs, (x) => x.action === "job.retry", "retry").detail as string, /events/);
      assert.match(one(recs, (x) => x.action === "job.delete", "del").detail as string, /events/);
    });
  },
});

Deno.test({
  name: "audit: filters, paging with next, and malformed filters are 404",
  ...serverTestOpts,
  fn: async () => {
    const config = (await identities()) + POLICY + `\n[global.audit]\nenabled = true\n`;
    await withServer({ config }, async (s) => {
      await pushImageAs(s, "alice", "team/a", "t1");
      const mid = Date.now();
      await new Promise((r) => setTimeout(r, 20));
      await pushImageAs(s, "root", "other/b", "t2");
      await pushImageAs(s, "alice", "team/c", "t3");
      const all = await auditAll(s);
      assert.equal(all.length, 12, "4 records per image");
      const times = all.map((r) => r.id);
      assert.deepEqual(times, [...times].sort().reverse(), "newest first");

      const alice = await auditAll(s, "?identity=alice");
      assert.equal(alice.length, 8);
      assert.ok(alice.every((r) => r.identity === "alice"));
      const team = await auditAll(s, "?namespace=team/");
      assert.deepEqual(new Set(team.map((r) => r.namespace)), new Set(["team/a", "team/c"]));
      const pushes = await auditAll(s, "?action=manifest.push&namespace=team");
      assert.deepEqual(pushes.map((r) => r.reference), ["t3", "t1"]);
      const since = new Date(mid).toISOString();
      const after = await auditAll(s, `?since=${since}&action=manifest.push`);
      assert.deepEqual(after.map((r) => r.reference), ["t3", "t2"]);
      const before = await auditAll(s, `?until=${since}&action=manifest.push`);
      assert.deepEqual(before.map((r) => r.reference), ["t1"]);

      // Paging: n=5 gives 5, 5, 2 with next cursors, no record twice.
      const p1 = await audit(s, "?n=5");
      assert.equal(p1.records.length, 5);
      assert.ok(p1.next);
      const p2 = await audit(s, `?n=5&next=${p1.next}`);
      const p3 = await audit(s, `?n=5&next=${p2.next}`);
      assert.equal(p3.records.length, 2);
      const paged = [...p1.records, ...p2.records, ...p3.records].map((r) => r.id);
      assert.deepEqual(paged, times);
      assert.equal((await audit(s, "?n=0")).records.length, 0);

      for (
        const bad of [
          "?since=yesterday",
          "?until=2026-13-45T00:00:00Z",
          "?n=-1",
          "?n=abc",
          "?next=nope",
          "?action=Manifest%20Push",
          "?namespace=UPPER",
          "?identity=",
          "?action=a&action=b",
          `?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z`,
          `?identity=${"x".repeat(300)}`,
        ]
      ) {
        const r = await req(s, `/v2/_svc/audit${bad}`, { headers: as("root") });
        await assertErrorCode(r, 404, "NAME_UNKNOWN");
      }
      // list-audit is a CEL action: alice is refused it (and that refusal is recorded).
      const r = await req(s, "/v2/_svc/audit", { headers: as("alice") });
      await assertErrorCode(r, 403, "DENIED");
      const d = await auditAll(s, "?action=list-audit");
      assert.equal(d.length, 1);
      assert.equal(d[0].outcome, "denied");
    });
  },
});

Deno.test({
  name: "audit: off by default: no records, no endpoint, nothing else changes",
  ...serverTestOpts,
  fn: async () => {
    const s = await startServer({});
    try {
      const r0 = await req(s, "/v2/_svc/audit");
      await assertErrorCode(r0, 404, "NAME_UNKNOWN");
      await pushImage(s.url, "plain/app", "v1");
      const r = await req(s, "/v2/plain/app/manifests/v1");
      await r.body?.cancel();
      assert.equal(r.status, 200);
    } finally {
      await s.stop();
    }
    const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
    try {
      let n = 0;
      for await (const _ of kv.list({ prefix: ["audit"] })) n++;
      assert.equal(n, 0);
    } finally {
      kv.close();
      await Deno.remove(s.dataDir, { recursive: true });
    }
  },
});

Deno.test({
  name: "audit: an acknowledged push has its record though the server is killed right after",
  ...serverTestOpts,
  fn: async () => {
    const config = `\n[global.audit]\nenabled = true\n`;
    let s = await startServer({ config });
    const dataDir = s.dataDir;
    try {
      const digests: string[] = [];
      for (let i = 0; i < 5; i++) {
        const body = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: "application/vnd.oci.image.index.v1+json",
          manifests: [],
          annotations: { n: String(i) },
        }));
        const r = await req(s, `/v2/crash/app/manifests/t${i}`, {
          method: "PUT",
          body,
          headers: { "content-type": "application/vnd.oci.image.index.v1+json" },
        });
        await r.body?.cancel();
        assert.equal(r.status, 201);
        digests.push(`sha256:${await sha256Hex(body)}`);
      }
      await s.kill(); // SIGKILL right after the last answer
      // Each record was written by the very commit that wrote its manifest and tag: one
      // versionstamp for both (a record written apart, even just before answering, has another).
      const kv = await Deno.openKv(join(dataDir, "metadata.kv"));
      try {
        for (const [i, digest] of digests.entries()) {
          const tag = await kv.get(["tag", "crash/app", `t${i}`]);
          const rev = await kv.get(["rev", "crash/app", digest]);
          assert.ok(tag.versionstamp && rev.versionstamp, `t${i} is stored`);
          const stamps = new Map<string, string>();
          for await (const e of kv.list<Rec>({ prefix: ["audit"] })) {
            if (e.value.reference === `t${i}`) stamps.set(e.value.action, e.versionstamp);
          }
          assert.equal(stamps.get("manifest.push"), rev.versionstamp, `t${i} push record`);
          assert.equal(stamps.get("tag.create"), tag.versionstamp, `t${i} tag record`);
        }
      } finally {
        kv.close();
      }
      s = await startServer({ config, dataDir });
      const recs = await auditAll(s, "?action=manifest.push", null);
      assert.deepEqual(recs.map((r) => r.digest).reverse(), digests);
    } finally {
      await s.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "audit: long names, tags and request ids stay within the KV limits",
  ...serverTestOpts,
  fn: async () => {
    await withServer({ config: `\n[global.audit]\nenabled = true\n` }, async (s) => {
      const ns = Array.from({ length: 4 }, (_, i) => `${i}${"n".repeat(59)}`).join("/");
      const tag = "t".repeat(128);
      const body = enc.encode(JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.index.v1+json",
        manifests: [],
      }));
      const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
        method: "PUT",
        body,
        headers: {
          "content-type": "application/vnd.oci.image.index.v1+json",
          "x-request-id": "x".repeat(5000),
        },
      });
      await r.body?.cancel();
      assert.equal(r.status, 201);
      const recs = await auditAll(s, "", null);
      assert.equal(recs.length, 2);
      for (const rec of recs) {
        assert.equal(rec.namespace, ns);
        assert.equal((rec.request_id as string).length, 36, "an oversized id is replaced");
      }
      assert.equal(recs.find((x) => x.action === "tag.create")!.reference, tag);
    });
  },
});

Deno.test("audit: bad [global.audit] config stops startup naming the key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-audit-cfg-" });
  try {
    for (
      const [toml, key] of [
        ['enabled = "yes"', "global.audit.enabled"],
        ["enabled = true\nmax_age_days = -1", "global.audit.max_age_days"],
        ["max_age_days = 1.5", "global.audit.max_age_days"],
        ["max_denials_per_minute = -5", "global.audit.max_denials_per_minute"],
        ["retention = 3", "global.audit.retention"],
      ]
    ) {
      const path = join(dir, "wharf.toml");
      await Deno.writeTextFile(
        path,
        `[server]\nport = 0\n[metadata_store]\npath = "${dir}/kv"\n[global.audit]\n${toml}\n`,
      );
      const out = await wharfCommand(["serve", "-c", path], {
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(out.stderr);
      assert.notEqual(out.code, 0, toml);
      assert.ok(err.includes(key), `${toml}: ${err}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
