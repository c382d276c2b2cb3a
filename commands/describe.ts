// The startup line's account of the config, shared by serve and worker.
import type { Config } from "../lib/config/mod.ts";
import { describeBlobStore } from "../lib/storage/mod.ts";
import { describeSandbox } from "./preflight.ts";

/** `ui`: whether this process serves HTTP at all. */
export function describe(cfg: Config, ui = true): string {
  const p = cfg.global.accessPolicy;
  const policy = p.rules.length === 0
    ? `access policy: ${p.default} all`
    : `access policy: default ${p.default}, ${p.rules.length} rule(s)`;
  const source = cfg.sources.length
    ? `config ${cfg.sources.join(", ")}`
    : "embedded default config";
  return `${source}; blobs ${describeBlobStore(cfg)}; metadata ${
    cfg.metadataStore.url ?? cfg.metadataStore.path
  }; ${policy}; ${describeSandbox(cfg)}${
    ui ? `; web UI ${cfg.ui.enabled ? "on at /" : "off"}` : ""
  }`;
}
