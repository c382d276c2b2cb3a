// Event webhooks (issue 14) over real HTTP: a receiver started here counts deliveries and checks
// their signatures. Async deliveries survive the receiver going away and the server being
// killed; `required` webhooks gate the operation; exhausted deliveries are dead letters in the
// jobs admin API; malformed webhook config stops startup naming the key.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, pushImage, startServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";

const FAST_QUEUE = `
[global.job_queue]
backoff_min_ms = 100
backoff_max_ms = 1000
poll_interval_ms = 100
`;

function hook(name: string, url: string, extra = ""): string {
  return `[event_webhook.${name}]\nurl = "${url}"\n${extra}\n`;
}

Deno.test(
  "async webhook: pushes, pulls and deletes each fire once, signed, with the payload",
  serverTestOpts,
  async () => {
    const rx = startReceiver("s3cret");
    try {
      await withServer({
        config: FAST_QUEUE + `[scan]\non_push = false\n` + hook("all", rx.url, `token = "s3cret"`),
      }, async (s) => {
        const img = await pushImage(s.url, "ev/app", "v1");
        await rx.waitFor((d) => d.length >= 4, 20_000, "push events");
        assert.equal(rx.ofKind("blob.push").length, 2, "config + layer");
        assert.equal(rx.ofKind("manifest.push").length, 1);
        assert.equal(rx.ofKind("tag.create").length, 1);
        const push = rx.ofKind("manifest.push")[0].event;
        assert.equal(push.namespace, "ev/app");
        assert.equal(push.repository, "ev");
        assert.equal(push.digest, img.digest);
        assert.equal(push.reference, "v1");
        assert.equal(push.tag, "v1");
        assert.deepEqual(push.actor, {
          username: null,
          id: null,
          provider: "anonymous",
          client_ip: "127.0.0.1",
        });
        assert.match(String(push.id), /^[0-9a-f-]{36}$/);
        assert.ok(!isNaN(Date.parse(String(push.timestamp))));
        for (const k of ["id", "timestamp", "kind", "namespace", "repository", "digest"]) {
          assert.ok(k in push, `payload has ${k}`);
        }
        assert.deepEqual(
          rx.ofKind("blob.push").map((d) => d.event.digest).sort(),
          [img.config, img.layer].sort(),
        );
        assert.ok(rx.deliveries.every((d) => d.signatureOk === true), "every body is signed");
        assert.equal(rx.deliveries[0].headers.get("content-type"), "application/json");

        // A HEAD is not a pull; a GET is.
        await (await req(s, `/v2/ev/app/manifests/v1`, { method: "HEAD" })).body?.cancel();
        await (await req(s, `/v2/ev/app/manifests/v1`)).body?.cancel();
        await rx.waitFor((d) => d.some((x) => x.event.kind === "manifest.pull"));

        // Re-pushing the same manifest to the same tag is a push but no tag change.
        const same = await req(s, `/v2/ev/app/manifests/v1`, {
          method: "PUT",
          body: img.body as BodyInit,
          headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
        });
        assert.equal(same.status, 201);
        await rx.waitFor((d) => d.filter((x) => x.event.kind === "manifest.push").length === 2);

        assert.equal((await req(s, `/v2/ev/app/manifests/v1`, { method: "DELETE" })).status, 202);
        assert.equal(
          (await req(s, `/v2/ev/app/manifests/${img.digest}`, { method: "DELETE" })).status,
          202,
        );
        assert.equal(
          (await req(s, `/v2/ev/app/blobs/${img.layer}`, { method: "DELETE" })).status,
          202,
        );
        await rx.waitFor(
          (d) =>
            ["tag.delete", "manifest.delete", "blob.delete"].every((k) =>
              d.some((x) => x.event.kind === k)
            ),
        );
        // Give stragglers (duplicates) a moment to show, then count exactly.
        await new Promise((r) => setTimeout(r, 500));
        const count = (k: string) => rx.ofKind(k).length;
        assert.deepEqual(
          Object.fromEntries(
            [
              "blob.push",
              "manifest.push",
              "tag.create",
              "manifest.pull",
              "tag.delete",
              "manifest.delete",
              "blob.delete",
            ]
              .map((k) => [k, count(k)]),
          ),
          {
            "blob.push": 2,
            "manifest.push": 2,
            "tag.create": 1,
            "manifest.pull": 1,
            "tag.delete": 1,
            "manifest.delete": 1,
            "blob.delete": 1,
          },
        );
        assert.equal(rx.ofKind("tag.delete")[0].event.digest, img.digest);
        assert.equal(rx.ofKind("blob.delete")[0].event.digest, img.layer);
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test(
  "events and repository_filter select what a webhook receives",
  serverTestOpts,
  async () => {
    const rx = startReceiver();
    try {
      await withServer({
        config: FAST_QUEUE +
          hook("tags", rx.url, `events = ["tag.create"]\nrepository_filter = ["keep/.*"]`),
      }, async (s) => {
        await pushImage(s.url, "skip/a", "v1");
        await pushImage(s.url, "keep/a", "v1");
        await rx.waitFor((d) => d.length >= 1);
        await new Promise((r) => setTimeout(r, 700));
        assert.deepEqual(rx.deliveries.map((d) => [d.event.kind, d.event.namespace]), [[
          "tag.create",
          "keep/a",
        ]]);
        assert.equal(rx.deliveries[0].signatureOk, null);
        assert.equal(
          rx.deliveries[0].headers.get("x-svc-signature-256"),
          null,
          "no token: unsigned",
        );
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test(
  "receiver down, server killed meanwhile: every event arrives once it is back",
  serverTestOpts,
  async () => {
    const rx = startReceiver("t");
    const port = rx.port;
    await rx.stop();
    // lease_secs: a server killed mid-batch holds the outbox for at most one term.
    const config = FAST_QUEUE + `lease_secs = 3\n[scan]\non_push = false\n` +
      hook("h", `http://127.0.0.1:${port}/hook`, `token = "t"\nmax_retries = 200`);
    const s1 = await startServer({ config });
    const pushed: string[] = [];
    try {
      for (let i = 0; i < 3; i++) pushed.push((await pushImage(s1.url, `down/n${i}`, "v1")).digest);
      // Deliveries are failing now; the outbox keeps them and retries with backoff.
      await new Promise((r) => setTimeout(r, 3000));
      const failed = await (await req(s1, `/v2/_svc/jobs/failed?queue=events`)).json();
      assert.deepEqual(failed.failed, [], "nothing is given up on while retries remain");
      const metrics = await (await req(s1, "/metrics")).text();
      const pending = /wharf_event_outbox_pending\{webhook="h"\} (\d+)/.exec(metrics);
      assert.ok(pending && Number(pending[1]) >= 9, `pending deliveries: ${pending?.[0]}`);
      // Killed without a chance to flush anything: the records in KV are the queue.
      await s1.kill();
    } catch (e) {
      await s1.kill();
      throw e;
    }
    const s2 = await startServer({ config, dataDir: s1.dataDir });
    try {
      await new Promise((r) => setTimeout(r, 5000)); // still down: ~10 s of outage in all
      const back = startReceiver("t", port);
      try {
        await back.waitFor(
          (d) =>
            d.filter((x) => x.event.kind === "manifest.push").length >= 3 &&
            d.filter((x) => x.event.kind === "blob.push").length >= 6 &&
            d.filter((x) => x.event.kind === "tag.create").length >= 3,
          30_000,
          "the backlog",
        );
        assert.deepEqual(
          back.ofKind("manifest.push").map((d) => d.event.digest).sort(),
          [...new Set(pushed)].sort(),
        );
        assert.ok(back.deliveries.every((d) => d.signatureOk === true));
      } finally {
        await back.stop();
      }
    } finally {
      await s2.stop();
      await Deno.remove(s1.dataDir, { recursive: true }).catch(() => {});
    }
  },
);

Deno.test(
  "a delivery out of retries is a dead letter in the jobs admin API, and can be retried",
  serverTestOpts,
  async () => {
    const rx = startReceiver();
    rx.status = 500;
    try {
      await withServer({
        config: FAST_QUEUE + hook("flaky", rx.url, `max_retries = 1\nevents = ["tag.create"]`),
      }, async (s) => {
        await pushImage(s.url, "dead/a", "v1");
        let failed: { failed?: { storage_key: string; kind: string; last_error: string }[] } = {};
        const end = Date.now() + 15_000;
        while (Date.now() < end) {
          failed = await (await req(s, `/v2/_svc/jobs/failed?queue=events`)).json();
          if ((failed.failed?.length ?? 0) > 0) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        const items = failed.failed ?? [];
        assert.equal(items.length, 1, JSON.stringify(failed));
        assert.equal(items[0].kind, "deliver-event");
        assert.match(items[0].last_error, /webhook flaky answered 500/);
        assert.equal(rx.deliveries.length, 0);
        rx.status = 204;
        const retry = await req(
          s,
          `/v2/_svc/jobs/failed?queue=events&key=${items[0].storage_key}`,
          { method: "POST" },
        );
        assert.equal(retry.status, 204);
        await rx.waitFor((d) => d.length === 1);
        assert.equal(rx.deliveries[0].event.kind, "tag.create");
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test(
  "required webhook: a refusal or no answer fails the push; an answer lets it through",
  serverTestOpts,
  async () => {
    const rx = startReceiver("k");
    try {
      await withServer({
        config: hook(
          "gate",
          rx.url,
          `policy = "required"\nevents = ["manifest.push", "blob.delete"]\ntoken = "k"\ntimeout_ms = 500`,
        ),
      }, async (s) => {
        const enc = new TextEncoder();
        const cfg = await pushBlob(s.url, "req/a", enc.encode("{}"));
        const manifest = JSON.stringify({
          schemaVersion: 2,
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: cfg, size: 2 },
          layers: [],
        });
        const put = () =>
          req(s, `/v2/req/a/manifests/v1`, {
            method: "PUT",
            body: manifest,
            headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
          });
        rx.status = 403;
        await assertErrorCode(await put(), 403, "DENIED");
        assert.equal((await req(s, `/v2/req/a/manifests/v1`)).status, 404, "nothing was written");
        rx.status = 200;
        rx.delayMs = 1500;
        const slow = await put();
        await assertErrorCode(slow, 503, "PROVIDER_UNAVAILABLE");
        assert.equal((await req(s, `/v2/req/a/manifests/v1`)).status, 404);
        rx.delayMs = 0;
        const ok = await put();
        assert.equal(ok.status, 201);
        assert.equal(rx.ofKind("manifest.push").length, 1);
        assert.equal(rx.deliveries[0].signatureOk, true);
        const got = await req(s, `/v2/req/a/manifests/v1`);
        assert.equal(got.status, 200);
        await got.body?.cancel();
        // Another kind the webhook does not gate is not asked.
        const blob = await pushBlob(s.url, "req/a", enc.encode("loose"));
        rx.status = 500;
        await assertErrorCode(
          await req(s, `/v2/req/a/blobs/${blob}`, { method: "DELETE" }),
          403,
          "DENIED",
        );
        assert.equal((await req(s, `/v2/req/a/blobs/${blob}`, { method: "HEAD" })).status, 200);
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test(
  "a receiver answering garbage or hanging never blocks pushes",
  serverTestOpts,
  async () => {
    // A raw TCP listener that answers garbage to half the connections and never answers the rest.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const conns: Deno.Conn[] = [];
    let n = 0;
    (async () => {
      for await (const c of listener) {
        conns.push(c);
        if (n++ % 2 === 0) {
          c.write(new TextEncoder().encode("NOT HTTP AT ALL\r\n\r\n\x00\xff")).catch(() => {});
        }
      }
    })().catch(() => {});
    try {
      await withServer({
        config: FAST_QUEUE +
          hook(
            "bad",
            `http://127.0.0.1:${listener.addr.port}/`,
            `timeout_ms = 300\nmax_retries = 2`,
          ),
      }, async (s) => {
        const t0 = performance.now();
        for (let i = 0; i < 5; i++) await pushImage(s.url, `garbage/a`, `v${i}`);
        assert.ok(performance.now() - t0 < 10_000, "pushes were not held up by deliveries");
        const health = await req(s, "/healthz");
        assert.equal(health.status, 200);
        await health.body?.cancel();
        // Deliveries fail and are dead-lettered, the server stays up.
        const end = Date.now() + 20_000;
        let failed = 0;
        while (Date.now() < end) {
          const f = await (await req(s, `/v2/_svc/jobs/failed?queue=events&n=1000`)).json();
          failed = f.failed?.length ?? 0;
          if (failed >= 5) break;
          await new Promise((r) => setTimeout(r, 300));
        }
        assert.ok(failed >= 5, `dead letters: ${failed}`);
      });
    } finally {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    }
  },
);

Deno.test(
  "more webhooks than fit a commit: one fan-out job, then one delivery per webhook",
  serverTestOpts,
  async () => {
    const rx = startReceiver();
    try {
      const hooks = Array.from(
        { length: 7 },
        (_, i) => hook(`h${i}`, `${rx.url}/h${i}`, `events = ["tag.create"]`),
      ).join("");
      await withServer({ config: FAST_QUEUE + hooks }, async (s) => {
        await pushImage(s.url, "fan/a", "v1");
        await rx.waitFor((d) => d.length >= 7);
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(rx.deliveries.length, 7);
        assert.equal(
          new Set(rx.deliveries.map((d) => d.event.id)).size,
          1,
          "one event, fanned out",
        );
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test("malformed webhook config stops startup naming the key", async () => {
  for (
    const [toml, re] of [
      [
        `[event_webhook.x]\nurl = "not a url"\n`,
        /event_webhook\.x\.url: "not a url" is not a valid URL/,
      ],
      [
        `[event_webhook.x]\nurl = "ftp://h/x"\n`,
        /event_webhook\.x\.url: .* must be an http\(s\) URL/,
      ],
      [`[event_webhook.x]\n`, /event_webhook\.x\.url: is required/],
      [
        `[event_webhook.x]\nurl = "http://h/"\nevents = ["manifest.pushed"]\n`,
        /event_webhook\.x\.events\[0\]: unknown event/,
      ],
      [`[event_webhook.x]\nurl = "http://h/"\npolicy = "sometimes"\n`, /event_webhook\.x\.policy/],
      [`[auth.webhook.a]\nurl = "::"\n`, /auth\.webhook\.a\.url/],
      [
        `[global]\nauthorization_webhook = "nope"\n`,
        /global\.authorization_webhook: "nope" is not a configured/,
      ],
    ] as const
  ) {
    await assert.rejects(
      () => startServer({ config: toml }),
      (e: Error) => {
        assert.match(e.message, /server exited \(2\)/);
        assert.match(e.message, re);
        return true;
      },
    );
  }
});

Deno.test(
  "async webhook: blob links, unlinks and scan reports carry their deliveries in their own commit",
  serverTestOpts,
  async () => {
    const { join } = await import("node:path");
    const { pushTarImage } = await import("../helpers/tar_image.ts");
    const { tarOf } = await import("../helpers/tar.ts");
    const { sha256Hex } = await import("../helpers/server.ts");
    // No drainer here (events concurrency 0): the entries stay as their commits wrote them.
    await withServer({
      config: `[global.job_queue]\npoll_interval_ms = 100\nconcurrency.events = 0\n` +
        hook("all", "http://127.0.0.1:9/"),
    }, async (s) => {
      const img = await pushTarImage(s.url, "tx/app", "v1", [
        tarOf([{ path: "etc/hello.txt", data: "hi\n" }]),
      ]);
      // a blob uploaded in a session (POST, PATCH, PUT)
      const bytes = new TextEncoder().encode(`session blob ${crypto.randomUUID()}`);
      const digest = `sha256:${await sha256Hex(bytes)}`;
      const start = await req(s, `/v2/tx/app/blobs/uploads/`, { method: "POST" });
      await start.body?.cancel();
      const loc = start.headers.get("location")!;
      const patch = await req(s, loc, { method: "PATCH", body: bytes });
      await patch.body?.cancel();
      const put = await req(s, `${patch.headers.get("location")}?digest=${digest}`, {
        method: "PUT",
      });
      await put.body?.cancel();
      assert.equal(put.status, 201);
      // a mount into another namespace, then a delete there
      const mount = await req(s, `/v2/tx/other/blobs/uploads/?mount=${digest}&from=tx/app`, {
        method: "POST",
      });
      await mount.body?.cancel();
      assert.equal(mount.status, 201);
      const del = await req(s, `/v2/tx/other/blobs/${digest}`, { method: "DELETE" });
      await del.body?.cancel();
      assert.equal(del.status, 202);
      // the scan of the pushed image (scan on push is on by default)
      const deadline = Date.now() + 60_000;
      const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
      try {
        const outbox = async () => {
          const out: Deno.KvEntry<{ event: Record<string, string> }>[] = [];
          for await (const e of kv.list<{ event: Record<string, string> }>({ prefix: ["evq"] })) {
            out.push(e);
          }
          return out;
        };
        while (!(await outbox()).some((e) => e.value.event.kind === "scan.completed")) {
          assert.ok(Date.now() < deadline, "no scan.completed entry");
          await new Promise((r) => setTimeout(r, 200));
        }
        const entries = await outbox();
        // No advisory data is loaded here: the report was not checked, and its event says so
        // instead of carrying zero counts that read as clean.
        const scanned = entries.find((e) => e.value.event.kind === "scan.completed")!.value.event;
        assert.equal(scanned.severity_counts, undefined);
        assert.equal(scanned.vulnerabilities_checked, false);
        assert.match(scanned.not_checked, /no advisory data/);
        const one = (kind: string, ns: string, d: string) => {
          const found = entries.filter((e) =>
            e.value.event.kind === kind && e.value.event.namespace === ns &&
            e.value.event.digest === d
          );
          assert.equal(found.length, 1, `one ${kind} of ${d} in ${ns}`);
          return found[0].versionstamp;
        };
        const stamp = async (key: Deno.KvKey) => (await kv.get(key)).versionstamp;
        // monolithic pushes (the image's config and layer) and the session's PUT
        for (const d of [...img.layers, digest]) {
          assert.equal(one("blob.push", "tx/app", d), await stamp(["link", "tx/app", d]), d);
        }
        // the mount's link is gone with the delete; the delete wrote unlinkver in its commit
        assert.ok(one("blob.push", "tx/other", digest), "the mount fired blob.push");
        assert.equal(
          one("blob.delete", "tx/other", digest),
          await stamp(["unlinkver", "tx/other"]),
        );
        assert.equal(
          one("scan.completed", "tx/app", img.digest),
          await stamp(["scanrep", img.digest]),
        );
      } finally {
        kv.close();
      }
    });
  },
);
