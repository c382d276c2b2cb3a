// Credentials an image config carries in the clear: `Env` values and the `created_by` lines of
// its history, found with the layer index's secret scanner.
import { SecretScanner } from "../index/mod.ts";

export interface ConfigSecret {
  /** `env` (an `Env` entry) or `history` (a `created_by` line) */
  source: "env" | "history";
  /** position in `Env` or `history` */
  index: number;
  /** the variable's name for `env` (never its value) */
  name?: string;
  kind: string;
}

/** Credentials in the config's `Env` values and `history[].created_by` lines. */
export function configSecrets(config: unknown): ConfigSecret[] {
  const out: ConfigSecret[] = [];
  const c = (config as { config?: { Env?: unknown }; history?: unknown }) ?? {};
  const env = Array.isArray(c.config?.Env) ? c.config!.Env as unknown[] : [];
  const enc = new TextEncoder();
  const scan = (text: string) => {
    const s = new SecretScanner("config.json");
    s.push(enc.encode(text));
    return s.finish();
  };
  env.forEach((v, index) => {
    if (typeof v !== "string") return;
    const eq = v.indexOf("=");
    const name = eq > 0 ? v.slice(0, eq) : v;
    // As the shell would write it, so the `KEY=value` rules (secret access keys) apply.
    const kinds = new Set(scan(`${name}=${eq > 0 ? v.slice(eq + 1) : ""}`).map((f) => f.kind));
    for (const kind of kinds) out.push({ source: "env", index, name: name.slice(0, 256), kind });
  });
  const history = Array.isArray(c.history) ? c.history : [];
  history.forEach((h, index) => {
    const line = (h as { created_by?: unknown })?.created_by;
    if (typeof line !== "string") return;
    const kinds = new Set(scan(line.replaceAll("\t", " ")).map((f) => f.kind));
    for (const kind of kinds) out.push({ source: "history", index, kind });
  });
  return out;
}
