// What a serving or working process needs from its permissions and machine for the config it was
// given, checked before it opens anything (docs/design.md, "As shipped"): a process that lacks
// one refuses to start with one line naming the flag or key, rather than running degraded in
// silence (an index job that cannot start its sandbox fails every layer).
import { dirname, resolve } from "node:path";
import type { Config } from "../lib/config/mod.ts";
import { launchStyle, probeSandbox, processSandboxProblem } from "../lib/sandbox/mod.ts";

function granted(d: Deno.PermissionDescriptor): boolean {
  try {
    return Deno.permissions.querySync(d).state === "granted";
  } catch {
    return false;
  }
}

/** Where the sandbox is asked for, as the config keys say it. */
function processSandboxKeys(cfg: Config): string[] {
  return [
    ...(cfg.global.index.sandbox === "process" ? ["[global.index] sandbox"] : []),
    ...(cfg.scan.sandbox === "process" ? ["[scan] sandbox"] : []),
  ];
}

/** One sentence per thing this process lacks for `cfg`; empty when it lacks nothing. */
export function preflight(cfg: Config): string[] {
  const problems: string[] = [];
  const keys = processSandboxKeys(cfg);
  if (keys.length > 0) {
    const p = processSandboxProblem();
    if (p) problems.push(`${keys.map((k) => `${k} = "process"`).join(" and ")} ${p}`);
  }
  const writable = (path: string, key: string) => {
    if (!granted({ name: "write", path })) {
      problems.push(`${key} = ${JSON.stringify(path)}: no write access (grant --allow-write)`);
    }
  };
  const readable = (path: string | null, key: string) => {
    if (path !== null && !granted({ name: "read", path })) {
      problems.push(`${key} = ${JSON.stringify(path)}: no read access (grant --allow-read)`);
    }
  };
  if (!cfg.blobStore.s3) writable(resolve(cfg.blobStore.fs.rootDir), "[blob_store.fs] root_dir");
  if (!cfg.metadataStore.url) {
    const path = resolve(cfg.metadataStore.path);
    writable(dirname(path), "[metadata_store] path");
  }
  const tls = cfg.server.tls;
  if (tls) {
    readable(tls.serverCertificateBundle, "[server.tls] server_certificate_bundle");
    readable(tls.serverPrivateKey, "[server.tls] server_private_key");
    readable(tls.clientCaBundle, "[server.tls] client_ca_bundle");
  }
  for (const [name, repo] of cfg.repositories) {
    for (const [i, up] of (repo.upstreams ?? []).entries()) {
      readable(up.caBundle, `[[repository."${name}".upstream]] #${i + 1} ca_bundle`);
    }
  }
  return problems;
}

/** The sandbox in force, for the startup line. */
export function describeSandbox(cfg: Config): string {
  const style = (mode: string) =>
    mode === "process" && launchStyle() === "self" ? "process (this executable)" : mode;
  const index = style(cfg.global.index.sandbox);
  const scan = style(cfg.scan.sandbox);
  return index === scan ? `sandbox ${index}` : `sandbox: index ${index}, scan ${scan}`;
}

/** Startup refused: the message names every missing permission, one per line. */
export class PreflightError extends Error {
  override name = "PreflightError";
}

/**
 * Throws a PreflightError when `preflight` finds anything, or when a sandbox child of the mode
 * the config names does not start.
 */
export async function refuseWithout(cfg: Config): Promise<void> {
  const problems = preflight(cfg);
  if (problems.length === 0) {
    const modes = new Set([cfg.global.index.sandbox, cfg.scan.sandbox]);
    for (const mode of modes) {
      if (mode === "off") continue;
      const why = await probeSandbox(mode);
      if (why) problems.push(`sandbox = "${mode}": a sandbox child does not start here: ${why}`);
    }
  }
  if (problems.length > 0) {
    throw new PreflightError(problems.map((p) => `wharf: cannot start: ${p}`).join("\n"));
  }
}
