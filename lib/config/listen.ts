// serve's listen address given outside the config files: the `--port` / `--bind` flags and the
// WHARF_PORT / WHARF_BIND environment variables. Precedence: flag > environment > config file >
// default. What was given holds for the process (listen_given.ts).
import { ConfigError } from "./config_reader.ts";
import type { ListenOverrides } from "./listen_given.ts";

export { type ListenOverrides, setListenOverrides } from "./listen_given.ts";

/** serve's flags, as given on the command line (null: not given). */
export interface ListenFlags {
  port: string | null;
  bind: string | null;
}

export const PORT_ENV = "WHARF_PORT";
export const BIND_ENV = "WHARF_BIND";

function port(value: string, where: string): number {
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
    throw new ConfigError(`${where} must be a port from 0 to 65535 (got ${value || "nothing"})`);
  }
  return Number(value);
}

function address(value: string, where: string): string {
  if (value.trim() === "" || /\s/.test(value)) {
    throw new ConfigError(`${where} must be an address such as 127.0.0.1 or :: (got "${value}")`);
  }
  return value;
}

/**
 * The address `flags` and the environment (`env`, a variable's value or undefined) give; a
 * malformed value is a ConfigError naming its flag or variable. An empty variable counts as
 * unset (as a shell's `WHARF_PORT=` reads).
 */
export function listenOverrides(
  flags: ListenFlags,
  env: (name: string) => string | undefined,
): ListenOverrides {
  const out: ListenOverrides = {};
  const envPort = env(PORT_ENV);
  const envBind = env(BIND_ENV);
  if (flags.port !== null) out.port = port(flags.port, "--port");
  else if (envPort) out.port = port(envPort, PORT_ENV);
  if (flags.bind !== null) out.bindAddress = address(flags.bind, "--bind");
  else if (envBind) out.bindAddress = address(envBind, BIND_ENV);
  return out;
}
