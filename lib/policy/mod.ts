// CEL access policies: one compiled policy and the set (global, then the namespace's
// repository) that allows or refuses a request.
export * from "./access_policy.ts";
export { PolicySet } from "./policy_set.ts";
