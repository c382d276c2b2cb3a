// Wharf on Deno Deploy (`deploy.sh deno-deploy`, docs/deploy.md). Deploy gives no writable
// filesystem, no KV queues and forbids proxying media, so here:
// - bytes live in S3 ([blob_store.s3] is required) and metadata in Deploy's KV
//   (`Deno.openKv()`; WHARF_KV_PATH overrides it for local runs);
// - the config is TOML text in WHARF_CONFIG (or a file deployed with the code: WHARF_CONFIG_FILE);
// - blob GETs always answer 307 to S3 (X-Svc-No-Redirect is ignored), manifests over 48 KiB too;
// - no runner polls the job queues: a Deno.cron every minute drains them for up to
//   WHARF_DRAIN_SECS (default 50) and stops, leases keeping two ticks from running one job twice;
// - scrub does not run inside (run `main.ts scrub` elsewhere against the same KV and bucket);
// - there are no subprocesses: layers and package databases are parsed in workers
//   (`sandbox = "worker"`, lib/sandbox/worker.ts) unless the config names a sandbox itself.
import { buildConfig, type Config, loadConfigFiles } from "../lib/config/mod.ts";
import { parse as parseToml } from "smol-toml";
import { PolicySet } from "../lib/policy/mod.ts";
import { holderName, openServices } from "../lib/services/mod.ts";
import { httpApp } from "../commands/http_app.ts";

export async function deployConfig(): Promise<Config> {
  const file = Deno.env.get("WHARF_CONFIG_FILE");
  const cfg = file
    ? await loadConfigFiles([file])
    : buildConfig(parseToml(Deno.env.get("WHARF_CONFIG") ?? "") as Record<string, unknown>, [
      "WHARF_CONFIG",
    ]);
  // The text again (already checked by the load above) to tell a default from a choice.
  const doc = parseToml(file ? await Deno.readTextFile(file) : Deno.env.get("WHARF_CONFIG") ?? "");
  const named = (table: unknown) =>
    typeof table === "object" && table !== null && "sandbox" in table;
  const global = doc.global as Record<string, unknown> | undefined;
  if (!named(global?.index)) cfg.global.index.sandbox = "worker";
  if (!named(doc.scan)) cfg.scan.sandbox = "worker";
  if (!cfg.blobStore.s3) {
    throw new Error("Deno Deploy has no writable filesystem: [blob_store.s3] is required");
  }
  // Bytes never pass through Deploy on the way out.
  cfg.global.enableBlobRedirect = true;
  cfg.global.enableManifestRedirect = true;
  cfg.global.scrub.intervalSecs = null;
  return cfg;
}

/** Blob GETs are redirected whatever the client asks: Deploy may not serve media. */
export function forceRedirects(req: Request): Request {
  if (!req.headers.has("x-svc-no-redirect")) return req;
  const headers = new Headers(req.headers);
  headers.delete("x-svc-no-redirect");
  return new Request(req, { headers });
}

if (import.meta.main) {
  const cfg = await deployConfig();
  const policies = new PolicySet(cfg);
  const services = await openServices(cfg, {
    role: "deploy",
    deployKvPath: Deno.env.get("WHARF_KV_PATH"),
  });
  const { jobs } = services;
  const { app } = httpApp(services, policies);
  const drainMs = Number(Deno.env.get("WHARF_DRAIN_SECS") ?? "50") * 1000;
  Deno.cron("wharf drain job queues", "* * * * *", async () => {
    jobs.start(holderName("cron"));
    await new Promise((r) => setTimeout(r, drainMs));
    await jobs.stop();
    console.log("wharf cron: job queues drained");
  });
  Deno.serve(
    {
      port: Number(Deno.env.get("PORT") ?? "8000"),
      hostname: Deno.env.get("WHARF_HOSTNAME") ?? "0.0.0.0",
      onListen: ({ hostname, port }) =>
        console.log(`wharf (deno deploy entry) listening on http://${hostname}:${port}`),
    },
    (req, info) =>
      app.fetch(forceRedirects(req), { remoteAddr: info.remoteAddr.hostname, certificate: null }),
  );
}
