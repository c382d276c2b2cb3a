export * from "./access_policy.ts";
export { PolicySet } from "./policy_set.ts";
