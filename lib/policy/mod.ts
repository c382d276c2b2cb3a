export * from "./access_policy.ts";
