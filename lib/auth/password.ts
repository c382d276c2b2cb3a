// argon2id password hashes (PHC strings) for `[auth.identity.<id>] password`.
// @node-rs/argon2 is a native addon (needs --allow-ffi): its async hash/verify run on the libuv
// thread pool, so a ~10 ms verify does not stall the event loop (hash-wasm would: ~34 ms).
//
// Loaded on first use: the addon alone adds ~17 MiB of RSS (measured: 34 → 52 MiB for a bare
// process), which a registry without Basic identities should not pay.
type Argon2 = typeof import("@node-rs/argon2");
let argon2: Promise<Argon2> | null = null;
const loadArgon2 = () => argon2 ??= import("@node-rs/argon2");

export interface Argon2Params {
  /** KiB */
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

/** OWASP's argon2id baseline (19 MiB, 2 passes, 1 lane). */
export const DEFAULT_ARGON2_PARAMS: Readonly<Argon2Params> = Object.freeze({
  memoryCost: 19456,
  timeCost: 2,
  parallelism: 1,
});

// `Algorithm` is an ambient const enum in the addon's typings; its value is inlined here because
// isolated modules cannot read ambient const enums.
const ARGON2ID = 2;

const PHC =
  /^\$argon2id\$v=19\$m=(\d{1,7}),t=(\d{1,4}),p=(\d{1,3})\$[A-Za-z0-9+/]{11,}\$[A-Za-z0-9+/]{16,}$/;

/** The cost parameters of a well-formed argon2id PHC string, or null. */
export function parsePhcParams(phc: string): Argon2Params | null {
  const m = typeof phc === "string" ? PHC.exec(phc) : null;
  if (!m) return null;
  const params = { memoryCost: +m[1], timeCost: +m[2], parallelism: +m[3] };
  if (params.timeCost < 1 || params.parallelism < 1 || params.memoryCost < 8 * params.parallelism) {
    return null;
  }
  return params;
}

export async function hashPassword(
  plain: string,
  params: Argon2Params = DEFAULT_ARGON2_PARAMS,
): Promise<string> {
  const { hash } = await loadArgon2();
  return await hash(plain, {
    algorithm: ARGON2ID,
    memoryCost: params.memoryCost,
    timeCost: params.timeCost,
    parallelism: params.parallelism,
  });
}

/** True when `plain` matches the argon2id hash; false for a mismatch or a malformed hash. */
export async function verifyPassword(phc: string, plain: string): Promise<boolean> {
  if (typeof plain !== "string" || parsePhcParams(phc) === null) return false;
  const { verify } = await loadArgon2();
  try {
    return await verify(phc, plain);
  } catch {
    return false;
  }
}
