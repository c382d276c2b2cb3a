// Everything a report reads from an image's pushed bytes, in one pure function: the package
// databases, language package metadata and the config. The scan job runs it in a sandbox
// (content_child.ts) and feeds it the files it picked from the merged filesystem; nothing here
// touches the network, the store or KV.
import { inventory, type Package } from "./package_dbs.ts";
import { parseNpmLock, pythonPackages } from "./language_pkgs.ts";
import type { OsInfo } from "./os_release.ts";
import { type ConfigSecret, configSecrets } from "./config_secrets.ts";

export interface ContentInput {
  /** package databases and release files by path */
  databases: Map<string, Uint8Array>;
  /** npm lockfiles by path */
  lockfiles: Map<string, Uint8Array>;
  /** paths of Python metadata directories and files */
  pythonPaths: string[];
  /** the image config's bytes; null when missing or too large */
  config: Uint8Array | null;
  maxPackages: number;
}

export interface ContentResult {
  os: OsInfo | null;
  packages: Package[];
  platform: { os: string; architecture: string; variant?: string } | null;
  configSecrets: ConfigSecret[];
  warnings: string[];
}

export function readImageContent(input: ContentInput): ContentResult {
  const warnings: string[] = [];
  const inv = inventory(input.databases, { maxPackages: input.maxPackages });
  warnings.push(...inv.warnings);
  let room = Math.max(0, input.maxPackages - inv.packages.length);
  const language = [pythonPackages(input.pythonPaths, { maxPackages: room })];
  room = Math.max(0, room - language[0].packages.length);
  for (const [path, bytes] of input.lockfiles) {
    const r = parseNpmLock(bytes, path, { maxPackages: room });
    room = Math.max(0, room - r.packages.length);
    language.push(r);
  }
  for (const r of language) {
    inv.packages.push(...r.packages);
    warnings.push(...r.warnings);
  }
  let config: unknown = null;
  if (input.config) {
    try {
      config = JSON.parse(new TextDecoder().decode(input.config));
    } catch {
      warnings.push("the image config is not JSON");
    }
  } else warnings.push("the image config is missing or too large to read");
  const cfg = config as { os?: unknown; architecture?: unknown; variant?: unknown } | null;
  const short = (v: string) => v.slice(0, 64);
  return {
    os: inv.os,
    packages: inv.packages,
    platform: typeof cfg?.os === "string" && typeof cfg?.architecture === "string"
      ? {
        os: short(cfg.os),
        architecture: short(cfg.architecture),
        ...(typeof cfg.variant === "string" ? { variant: short(cfg.variant) } : {}),
      }
      : null,
    configSecrets: config ? configSecrets(config) : [],
    warnings,
  };
}
