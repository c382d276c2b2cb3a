// Event webhooks seen from a real client: skopeo pushes, inspects and deletes an image from
// ../shared/tools/make-images.sh; a receiver started here counts what each operation fired.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";
import { buildImages, type Images, missingTools, skopeo, skopeoOk } from "./_skopeo.ts";

const skipReason = missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

const docker = (s: TestServer, ref: string) => `docker://127.0.0.1:${s.port}/${ref}`;

Deno.test({
  name: "skopeo push, inspect, delete: each event kind fires once per operation",
  ...base,
  fn: async () => {
    const img = images!;
    const rx = startReceiver("tok");
    try {
      await withServer({
        config: `[global.job_queue]\nbackoff_min_ms = 100\npoll_interval_ms = 100\n` +
          `[event_webhook.all]\nurl = "${rx.url}/events"\ntoken = "tok"\n`,
      }, async (s) => {
        await skopeoOk([
          "copy",
          "--dest-tls-verify=false",
          `oci:${img.layout}:v1`,
          docker(s, "sk/app:v1"),
        ], s);
        const blobs = [img.v1.config, ...img.v1.layers];
        await rx.waitFor(
          (d) =>
            d.filter((x) => x.event.kind === "blob.push").length >= blobs.length &&
            d.some((x) => x.event.kind === "manifest.push") &&
            d.some((x) => x.event.kind === "tag.create") &&
            d.some((x) => x.event.kind === "scan.completed"),
          60_000,
          "push events",
        );
        await new Promise((r) => setTimeout(r, 500));
        assert.deepEqual(
          rx.ofKind("blob.push").map((d) => d.event.digest).sort(),
          [...blobs].sort(),
          "one blob.push per blob",
        );
        assert.equal(rx.ofKind("manifest.push").length, 1);
        assert.equal(rx.ofKind("manifest.push")[0].event.digest, img.v1.digest);
        assert.equal(rx.ofKind("tag.create").length, 1);
        assert.equal(rx.ofKind("tag.create")[0].event.tag, "v1");
        const scan = rx.ofKind("scan.completed");
        assert.equal(scan.length, 1);
        assert.equal(scan[0].event.digest, img.v1.digest);
        // No advisory data is loaded here: the event says the image was not checked, instead of
        // zero counts that read as clean.
        assert.equal(scan[0].event.severity_counts, undefined, JSON.stringify(scan[0].event));
        assert.equal(scan[0].event.vulnerabilities_checked, false);
        assert.match(String(scan[0].event.not_checked), /no advisory data/);
        assert.ok(rx.deliveries.every((d) => d.signatureOk === true));
        const before = rx.deliveries.length;

        // skopeo inspect reads the manifest once (and the config as a blob: no event).
        await skopeoOk(["inspect", "--tls-verify=false", docker(s, "sk/app:v1")], s);
        await rx.waitFor((d) => d.some((x) => x.event.kind === "manifest.pull"));
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(rx.ofKind("manifest.pull").length, 1);
        assert.equal(rx.ofKind("manifest.pull")[0].event.reference, "v1");
        assert.equal(rx.deliveries.length, before + 1);

        // skopeo delete deletes the manifest by digest.
        const del = await skopeo(["delete", "--tls-verify=false", docker(s, "sk/app:v1")]);
        assert.equal(del.code, 0, del.stderr);
        await rx.waitFor((d) => d.some((x) => x.event.kind === "manifest.delete"));
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(rx.ofKind("manifest.delete").length, 1);
        assert.equal(rx.ofKind("manifest.delete")[0].event.digest, img.v1.digest);
        const gone = await req(s, `/v2/sk/app/manifests/${img.v1.digest}`);
        assert.equal(gone.status, 404);
        await gone.body?.cancel();
      });
    } finally {
      await rx.stop();
    }
  },
});

Deno.test({
  name: "skopeo push refused by a failing required webhook; allowed once it answers",
  ...base,
  fn: async () => {
    const img = images!;
    const rx = startReceiver();
    rx.status = 500;
    try {
      await withServer({
        config: `[event_webhook.gate]\nurl = "${rx.url}"\npolicy = "required"\n` +
          `events = ["manifest.push"]\n`,
      }, async (s) => {
        const push = () =>
          skopeo([
            "copy",
            "--dest-tls-verify=false",
            "--retry-times=0",
            `oci:${img.layout}:v1`,
            docker(s, "gated/app:v1"),
          ]);
        const refused = await push();
        assert.notEqual(refused.code, 0, "the push must fail");
        assert.match(refused.stderr, /denied|refused|403/i);
        const r = await req(s, `/v2/gated/app/manifests/v1`);
        assert.equal(r.status, 404, "no manifest stored");
        await r.body?.cancel();
        rx.status = 200;
        const ok = await push();
        assert.equal(ok.code, 0, ok.stderr);
        assert.equal(rx.ofKind("manifest.push").length, 1);
      });
    } finally {
      await rx.stop();
    }
  },
});
