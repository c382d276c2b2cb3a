export { digestBytes, Hasher } from "./hasher.ts";
export { Scavenger } from "./scavenge.ts";
