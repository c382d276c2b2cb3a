export * from "./errors.ts";
export * from "./grammar.ts";
export * from "./range.ts";
export * from "./media_types.ts";
export * from "./manifest.ts";
export * from "./link.ts";
