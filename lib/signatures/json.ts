// JSON from untrusted bytes, bounded in size and nesting before it is parsed.
import { Buffer } from "node:buffer";
import { LIMITS, Refused } from "./limits.ts";

const decoder = new TextDecoder("utf-8", { fatal: true });

/** `bytes` parsed as JSON, or Refused naming `what` (too large, too deep, not UTF-8 JSON). */
export function boundedJson(bytes: Uint8Array, maxBytes: number, what: string): unknown {
  if (bytes.byteLength > maxBytes) {
    throw new Refused(`${what} is larger than ${maxBytes} bytes`);
  }
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new Refused(`${what} is not UTF-8`);
  }
  if (nestingDepth(text) > LIMITS.jsonDepth) {
    throw new Refused(`${what} nests deeper than ${LIMITS.jsonDepth} levels`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Refused(`${what} is not valid JSON`);
  }
}

/** The deepest nesting of arrays and objects in `text`, strings skipped: one linear pass. */
export function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Strict base64 (standard alphabet, padding optional), or Refused naming `what`. */
export function base64Bytes(s: unknown, what: string): Uint8Array {
  if (typeof s !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 === 1) {
    throw new Refused(`${what} is not base64`);
  }
  return Uint8Array.from(Buffer.from(s, "base64"));
}
