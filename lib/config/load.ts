// Reads TOML files (later files win, key by key) and validates them into a Config.
// Every problem fails startup with the file and the dotted key path.
import { parse as parseToml } from "smol-toml";
import { type Config, defaultConfig, type RepositoryConfig } from "./schema.ts";
import { isValidName } from "../oci/grammar.ts";

export class ConfigError extends Error {}

type Table = Record<string, unknown>;

const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

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
  return buildConfig(doc, paths);
}

class Reader {
  constructor(private readonly files: string) {}
  fail(key: string, msg: string): never {
    throw new ConfigError(`config ${this.files}: ${key}: ${msg}`);
  }
  table(v: unknown, key: string): Table {
    if (v === undefined) return {};
    if (!isTable(v)) this.fail(key, "must be a table");
    return v;
  }
  only(t: Table, key: string, allowed: string[]) {
    for (const k of Object.keys(t)) {
      if (!allowed.includes(k)) this.fail(key ? `${key}.${k}` : k, "unknown key");
    }
  }
  str(t: Table, key: string, path: string): string | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "string") this.fail(`${path}.${key}`, "must be a string");
    return v;
  }
  bool(t: Table, key: string, path: string): boolean | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (typeof v !== "boolean") this.fail(`${path}.${key}`, "must be true or false");
    return v;
  }
  int(
    t: Table,
    key: string,
    path: string,
    min: number,
    max = Number.MAX_SAFE_INTEGER,
  ): number | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    const n = typeof v === "bigint" ? Number(v) : v;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max) {
      this.fail(`${path}.${key}`, `must be an integer from ${min} to ${max}`);
    }
    return n;
  }
  regexes(t: Table, key: string, path: string): RegExp[] | undefined {
    const v = t[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      this.fail(`${path}.${key}`, "must be an array of strings");
    }
    return (v as string[]).map((s, i) => {
      try {
        // Exclusions are full-match: anchor them so `latest` does not match `latest-rc`.
        return new RegExp(`^(?:${s})$`);
      } catch (e) {
        this.fail(`${path}.${key}[${i}]`, `invalid regex: ${(e as Error).message}`);
      }
    });
  }
}

export function buildConfig(doc: Table, paths: string[]): Config {
  const r = new Reader(paths.join(", ") || "(embedded default)");
  const cfg = defaultConfig();
  cfg.sources = paths;
  r.only(doc, "", ["server", "blob_store", "metadata_store", "global", "repository"]);

  const server = r.table(doc.server, "server");
  r.only(server, "server", ["bind_address", "port"]);
  cfg.server.bindAddress = r.str(server, "bind_address", "server") ?? cfg.server.bindAddress;
  cfg.server.port = r.int(server, "port", "server", 0, 65535) ?? cfg.server.port;

  const bs = r.table(doc.blob_store, "blob_store");
  r.only(bs, "blob_store", ["fs"]);
  const fs = r.table(bs.fs, "blob_store.fs");
  r.only(fs, "blob_store.fs", ["root_dir"]);
  cfg.blobStore.fs.rootDir = r.str(fs, "root_dir", "blob_store.fs") ?? cfg.blobStore.fs.rootDir;

  const md = r.table(doc.metadata_store, "metadata_store");
  r.only(md, "metadata_store", ["path"]);
  cfg.metadataStore.path = r.str(md, "path", "metadata_store") ?? cfg.metadataStore.path;

  const g = r.table(doc.global, "global");
  r.only(g, "global", [
    "max_blob_size",
    "max_manifest_size",
    "allow_missing_manifest_references",
    "immutable_tags",
    "immutable_tags_exclusions",
    "access_policy",
  ]);
  cfg.global.maxBlobSize = r.int(g, "max_blob_size", "global", 1) ?? null;
  cfg.global.maxManifestSize = r.int(g, "max_manifest_size", "global", 1, 64 * 1024 * 1024) ??
    cfg.global.maxManifestSize;
  cfg.global.allowMissingManifestReferences =
    r.bool(g, "allow_missing_manifest_references", "global") ??
      cfg.global.allowMissingManifestReferences;
  cfg.global.immutableTags = r.bool(g, "immutable_tags", "global") ?? false;
  cfg.global.immutableTagsExclusions = r.regexes(g, "immutable_tags_exclusions", "global") ?? [];
  const ap = r.table(g.access_policy, "global.access_policy");
  r.only(ap, "global.access_policy", ["default", "rules"]);
  const def = r.str(ap, "default", "global.access_policy") as "allow" | "deny" | undefined;
  if (def !== undefined && def !== "allow" && def !== "deny") {
    r.fail("global.access_policy.default", `must be "allow" or "deny"`);
  }
  if (ap.rules !== undefined) {
    r.fail("global.access_policy.rules", "access policy rules are not supported by this build yet");
  }
  cfg.global.accessPolicyDefault = def ?? "allow";

  const repos = r.table(doc.repository, "repository");
  const namespaces = new Map<string, string>();
  for (const [name, v] of Object.entries(repos)) {
    const path = `repository."${name}"`;
    if (!isValidName(name)) r.fail(path, "not a valid repository name");
    const t = r.table(v, path);
    r.only(t, path, ["immutable_tags", "immutable_tags_exclusions", "namespace"]);
    const rc: RepositoryConfig = {
      name,
      immutableTags: r.bool(t, "immutable_tags", path),
      immutableTagsExclusions: r.regexes(t, "immutable_tags_exclusions", path),
      namespace: r.str(t, "namespace", path),
    };
    if (rc.namespace !== undefined) {
      if (rc.namespace === "") r.fail(`${path}.namespace`, "must not be empty");
      const other = namespaces.get(rc.namespace);
      if (other) {
        r.fail(`${path}.namespace`, `"${rc.namespace}" is already served by repository "${other}"`);
      }
      namespaces.set(rc.namespace, name);
    }
    cfg.repositories.set(name, rc);
  }
  return cfg;
}
