export { digestBytes, Hasher } from "./hasher.ts";
