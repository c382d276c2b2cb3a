// The OCI distribution vocabulary every other folder speaks: the one error type (RegistryError),
// name/tag/digest grammar, media types, manifest parsing, Range headers and Link pagination.
export * from "./errors.ts";
export * from "./error_factories.ts";
export * from "./grammar.ts";
export * from "./range.ts";
export * from "./media_types.ts";
export * from "./manifest.ts";
export * from "./link.ts";
export * from "./source_timestamp.ts";
