// Byte and digest helpers shared by the API tests.
import { sha256Hex } from "./server.ts";

/** `n` random bytes: distinct content per call keeps cases independent. */
export function randomBytes(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `sha256:<hex>` of `data`. */
export async function sha256(data: Uint8Array): Promise<string> {
  return `sha256:${await sha256Hex(data)}`;
}

export async function sha512Hex(data: Uint8Array): Promise<string> {
  const h = await crypto.subtle.digest("SHA-512", data as BufferSource);
  return Array.from(new Uint8Array(h), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** `sha512:<hex>` of `data`. */
export async function sha512(data: Uint8Array): Promise<string> {
  return `sha512:${await sha512Hex(data)}`;
}
