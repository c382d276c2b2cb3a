export * from "./schema.ts";
export { buildConfig, ConfigError, loadConfigFiles } from "./load.ts";
export { repositoryOf, resolveNsParam } from "./repositories.ts";
export { applyReloadable, ConfigReloader, type ReloadResult, type Validate } from "./reload.ts";
