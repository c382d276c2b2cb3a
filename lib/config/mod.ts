// The configuration: TOML files read and validated into a Config with every default filled in
// (a problem names its file and key path), which repository governs a namespace, and live reload.
export * from "./schema.ts";
export { buildConfig, loadConfigFiles, parseVerifyConfig } from "./load.ts";
export { ConfigError } from "./config_reader.ts";
export {
  BIND_ENV,
  type ListenFlags,
  type ListenOverrides,
  listenOverrides,
  PORT_ENV,
  setListenOverrides,
} from "./listen.ts";
export { withListenOverrides } from "./listen_given.ts";
export { repositoryOf, resolveNsParam } from "./repositories.ts";
export { identityRefOf, type KnownIdentities, parseIdentityRef } from "./identity_refs.ts";
export { applyReloadable, ConfigReloader, type ReloadResult, type Validate } from "./reload.ts";
