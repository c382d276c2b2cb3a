// The listen address given outside the config files (listen.ts reads it from serve's flags and
// the environment), held for the process: every load of the config files puts it over their
// `[server]` values, a live reload's too, so the reload does not see `[server]` as changed.
import type { Config } from "./schema.ts";

export interface ListenOverrides {
  port?: number;
  bindAddress?: string;
}

let given: ListenOverrides = {};

/** Sets the address given outside the config files, for every later load in this process. */
export function setListenOverrides(o: ListenOverrides): void {
  given = { ...o };
}

/** `cfg` with the address given outside its files put over its `[server]` values. */
export function withListenOverrides(cfg: Config): Config {
  if (given.port !== undefined) cfg.server.port = given.port;
  if (given.bindAddress !== undefined) cfg.server.bindAddress = given.bindAddress;
  return cfg;
}
