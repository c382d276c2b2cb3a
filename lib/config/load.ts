// Reads TOML files (later files win, key by key) and validates them into a Config.
// Every problem fails startup with the file and the dotted key path.
import { parse as parseToml } from "smol-toml";
import { type Config, defaultConfig } from "./schema.ts";
import { readEventWebhooks } from "./hooks.ts";
import { withListenOverrides } from "./listen_given.ts";
import { readVerify, type VerifyConfig } from "./verify.ts";
import { ConfigError, Reader } from "./config_reader.ts";
import { isTable, type Table } from "./table_readers.ts";
import { readServer, readUi } from "./server_config.ts";
import { readAuth } from "./auth_config.ts";
import { readBlobStore, readMetadataStore } from "./store_config.ts";
import { readGlobal, readGlobalPolicies } from "./global_config.ts";
import { readScan } from "./scan_config.ts";
import { readRepositories } from "./repository_config.ts";

/** Deep-merges `b` over `a`; tables merge, every other value is replaced. */
function merge(a: Table, b: Table): Table {
  const out: Table = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] = isTable(v) && isTable(out[k]) ? merge(out[k] as Table, v) : v;
  }
  return out;
}

export async function loadConfigFiles(paths: string[]): Promise<Config> {
  let doc: Table = {};
  for (const p of paths) {
    let text: string;
    try {
      text = await Deno.readTextFile(p);
    } catch (e) {
      throw new ConfigError(`config ${p}: cannot read: ${(e as Error).message}`);
    }
    try {
      doc = merge(doc, parseToml(text) as Table);
    } catch (e) {
      throw new ConfigError(`config ${p}: invalid TOML: ${(e as Error).message}`);
    }
  }
  // serve's --port/--bind and WHARF_PORT/WHARF_BIND outrank every file (listen.ts).
  return withListenOverrides(buildConfig(doc, paths));
}

/**
 * A `[verify]` table (as `[repository."<name>".verify]` holds it) validated into a VerifyConfig;
 * throws ConfigError naming the key (`path` prefixes it) on a malformed key, root or pattern.
 */
export function parseVerifyConfig(table: unknown, path = "verify"): VerifyConfig {
  const v = readVerify(table ?? {}, path, (key, msg) => {
    throw new ConfigError(`${key}: ${msg}`);
  });
  return v!;
}

/** The merged TOML document into a Config, one section after another (the order errors come in). */
export function buildConfig(doc: Table, paths: string[]): Config {
  const r = new Reader(paths.join(", ") || "(embedded default)");
  const cfg = defaultConfig();
  cfg.sources = paths;
  r.only(doc, "", [
    "server",
    "blob_store",
    "metadata_store",
    "global",
    "repository",
    "auth",
    "ui",
    "scan",
    "event_webhook",
  ]);

  readServer(r, r.table(doc.server, "server"), cfg);
  readAuth(r, r.table(doc.auth, "auth"), cfg);
  readBlobStore(r, r.table(doc.blob_store, "blob_store"), cfg);
  readMetadataStore(r, r.table(doc.metadata_store, "metadata_store"), cfg);
  const g = r.table(doc.global, "global");
  readGlobal(r, g, cfg);
  cfg.eventWebhooks = readEventWebhooks(doc.event_webhook, r.fail.bind(r));
  readGlobalPolicies(r, g, cfg);
  readUi(r, r.table(doc.ui, "ui"), cfg);
  readScan(r, r.table(doc.scan, "scan"), cfg);
  readRepositories(r, r.table(doc.repository, "repository"), cfg);
  // The outbound clients see only their own section; the allow list rides along with it.
  const allow = cfg.global.outboundAllow;
  for (const rc of allow.length > 0 ? cfg.repositories.values() : []) {
    for (const u of [...rc.upstreams ?? [], ...rc.downstreams ?? []]) u.outboundAllow = allow;
  }
  for (const p of allow.length > 0 ? cfg.auth.oidc.values() : []) p.outboundAllow = allow;
  return cfg;
}
