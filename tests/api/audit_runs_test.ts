// Issue 26 §4, the server's own acts and the trail's bounds: scrub and prune runs and config
// reloads are recorded (a prune's deletes carry the run's request id); scrub drops records past
// [global.audit] max_age_days and keeps the rest; a flood of denied requests stores at most the
// configured number of denial records, the rest counted in the next stored one.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, runCli, withServer } from "../helpers/server.ts";
import { storageKey } from "../../lib/jobs/mod.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";
import { audit, auditAll, identities, POLICY, pushImageAs, waitFor } from "./audit_helpers.ts";

Deno.test({
  name: "audit: scrub enforces max_age_days and records its run; prune runs are recorded",
  ...serverTestOpts,
  fn: async () => {
    const config = `
[global.audit]
enabled = true
max_age_days = 7
[repository.pr.retention_policy]
rules = ['image.tag == "keep"']
`;
    await withServer({ config }, async (s) => {
      await pushImage(s.url, "pr/app", "keep");
      await pushImage(s.url, "pr/app", "drop");
      // Records from 10 and 3 days ago, written as the server would have then.
      const kv = await Deno.openKv(`${s.dataDir}/metadata.kv`);
      const day = 86_400_000;
      const old = storageKey(Date.now() - 10 * day, crypto.randomUUID());
      const recent = storageKey(Date.now() - 3 * day, crypto.randomUUID());
      try {
        for (const [id, at] of [[old, 10], [recent, 3]] as const) {
          await kv.set(["audit", id], {
            id,
            time: new Date(Date.now() - at * day).toISOString(),
            action: "manifest.push",
            outcome: "ok",
            identity: "someone",
            client_ip: "10.0.0.1",
            namespace: "pr/app",
            reference: `aged${at}`,
            digest: null,
            request_id: "r",
          });
        }
      } finally {
        kv.close();
      }
      const before = await auditAll(s, "", null);
      assert.ok(before.some((r) => r.id === old) && before.some((r) => r.id === recent));

      const dry = await runCli(s, "scrub", ["--dry-run"]);
      assert.equal(dry.code, 0, dry.stderr);
      assert.ok((await auditAll(s, "", null)).some((r) => r.id === old), "a dry run keeps it");

      const sc = await runCli(s, "scrub");
      assert.equal(sc.code, 0, sc.stderr);
      const after = await auditAll(s, "", null);
      assert.ok(!after.some((r) => r.id === old), "past max_age_days: dropped");
      assert.ok(after.some((r) => r.id === recent), "within max_age_days: kept");
      const runs = await auditAll(s, "?action=scrub.run", null);
      assert.equal(runs.length, 2);
      assert.match(runs[0].detail as string, /dropped 1 audit record/);
      assert.match(runs[1].detail as string, /would drop 1 audit record/);

      const pr = await runCli(s, "prune");
      assert.equal(pr.code, 0, pr.stderr);
      const prune = await auditAll(s, "?action=prune.run", null);
      assert.equal(prune.length, 1);
      assert.equal(prune[0].outcome, "ok");
      const deleted = await auditAll(s, "?action=tag.delete", null);
      assert.deepEqual(deleted.map((r) => r.reference), ["drop"]);
      assert.equal(deleted[0].request_id, prune[0].request_id, "the run's deletes share its id");
      assert.equal(deleted[0].identity, "wharf-retention", "retention acts as itself");
    });
  },
});

Deno.test({
  name: "audit: a config reload is recorded, and a refused one as failed",
  ...serverTestOpts,
  fn: async () => {
    await withServer({ config: `\n[global.audit]\nenabled = true\n` }, async (s) => {
      const text = await Deno.readTextFile(s.configPath);
      await Deno.writeTextFile(s.configPath, `${text}\n[global]\nmax_pulls = 7\n`);
      Deno.kill(s.pid, "SIGHUP");
      const ok = await waitFor("a config.reload record", async () => {
        const r = await audit(s, "?action=config.reload", null);
        return r.records[0] ?? null;
      });
      assert.equal(ok.outcome, "ok");
      await Deno.writeTextFile(s.configPath, `${text}\n[global.audit]\nfoo = 1\n`);
      Deno.kill(s.pid, "SIGHUP");
      const failed = await waitFor("a failed reload record", async () => {
        const r = await audit(s, "?action=config.reload", null);
        return r.records.find((x) => x.outcome === "failed") ?? null;
      });
      assert.match(failed.detail as string, /global\.audit/);
    });
  },
});

Deno.test({
  name: "audit: a flood of denied requests stores a bounded number of records",
  ...serverTestOpts,
  fn: async () => {
    const config = (await identities()) + POLICY + `
[global.audit]
enabled = true
max_denials_per_minute = 5
`;
    await withServer({ config }, async (s) => {
      const t0 = Date.now();
      const bob = { authorization: `Basic ${btoa("bob:bob-audit-pw-3")}` };
      for (let i = 0; i < 40; i++) {
        await Promise.all(Array.from({ length: 10 }, async (_, j) => {
          const r = await req(s, `/v2/team/x${i}-${j}/blobs/uploads/`, {
            method: "POST",
            headers: bob,
          });
          await assertErrorCode(r, 403, "DENIED");
        }));
      }
      const minutes = (Date.now() - t0) / 60_000;
      const denied = await auditAll(s, "?identity=bob");
      // The bucket starts full (5) and refills at 5 a minute.
      assert.ok(denied.length >= 5, `${denied.length}`);
      assert.ok(denied.length <= 5 + Math.ceil(minutes * 5), `${denied.length} records`);
      assert.ok(denied.every((r) => r.outcome === "denied" && r.action === "start-upload"));
      // Writes still get their records whatever the denial bucket holds.
      await pushImageAs(s, "alice", "team/ok", "v1");
      assert.equal((await auditAll(s, "?action=manifest.push")).length, 1);
    });
  },
});

Deno.test({
  name: "audit: webhooks naming audit.record receive every record; others do not",
  ...serverTestOpts,
  fn: async () => {
    const rx = startReceiver("tok");
    const all = startReceiver("tok");
    const config = (await identities()) + POLICY + `
[global.audit]
enabled = true
[global.job_queue]
poll_interval_ms = 50
[event_webhook.trail]
url = "${rx.url}/audit"
token = "tok"
events = ["audit.record"]
[event_webhook.all]
url = "${all.url}/all"
token = "tok"
`;
    try {
      await withServer({ config }, async (s) => {
        await pushImageAs(s, "alice", "team/hooked", "v1");
        const r = await req(s, "/v2/other/x/manifests/v1", {
          method: "PUT",
          body: "{}",
          headers: { authorization: `Basic ${btoa("bob:bob-audit-pw-3")}` },
        });
        await assertErrorCode(r, 403, "DENIED");
        const records = await auditAll(s);
        assert.equal(records.length, 5, "4 records of the push, 1 denial");
        await rx.waitFor((d) => d.length >= 5, 20_000, "audit.record deliveries");
        await all.waitFor((d) => d.length >= 4, 20_000, "the push's events");
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(rx.deliveries.length, 5);
        assert.ok(rx.deliveries.every((d) => d.event.kind === "audit.record" && d.signatureOk));
        assert.deepEqual(
          rx.deliveries.map((d) => (d.event.audit as { id: string }).id).sort(),
          records.map((x) => x.id).sort(),
          "the records the API lists, one delivery each",
        );
        const denial = rx.deliveries.find((d) =>
          (d.event.audit as { outcome: string }).outcome === "denied"
        )!;
        assert.deepEqual(denial.event.audit, records.find((x) => x.outcome === "denied"));
        assert.ok(
          all.deliveries.every((d) => d.event.kind !== "audit.record"),
          "a webhook of every kind does not get audit.record unless it names it",
        );
      });
    } finally {
      await rx.stop();
      await all.stop();
    }
  },
});
