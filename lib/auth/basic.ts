// Basic authentication against `[auth.identity.<id>]`. Every attempt costs one argon2 verify
// and one pass over all usernames, so response time does not reveal whether a username exists.
import { createHash, timingSafeEqual } from "node:crypto";
import type { BasicIdentityConfig } from "../config/mod.ts";
import type { Identity } from "./identity.ts";
import {
  type Argon2Params,
  DEFAULT_ARGON2_PARAMS,
  hashPassword,
  parsePhcParams,
  verifyPassword,
} from "./password.ts";

interface Entry {
  id: string;
  username: string;
  /** SHA-256 of the username: fixed length, so comparing it takes the same time for any input */
  digest: Uint8Array;
  /** null when the configured hash is malformed; such an identity can never sign in */
  hash: string | null;
}

function sha256(s: string): Uint8Array {
  return createHash("sha256").update(s, "utf8").digest();
}

/** The most common parameters among the configured hashes, so the dummy costs what they cost. */
function dominantParams(identities: BasicIdentityConfig[]): Argon2Params {
  const counts = new Map<string, { params: Argon2Params; n: number }>();
  for (const i of identities) {
    const p = parsePhcParams(i.password);
    if (!p) continue;
    const key = `${p.memoryCost},${p.timeCost},${p.parallelism}`;
    const c = counts.get(key) ?? { params: p, n: 0 };
    c.n++;
    counts.set(key, c);
  }
  let best: { params: Argon2Params; n: number } | null = null;
  for (const c of counts.values()) if (!best || c.n > best.n) best = c;
  return best?.params ?? { ...DEFAULT_ARGON2_PARAMS };
}

export class BasicAuthenticator {
  readonly #entries: Entry[];
  #dummy: Promise<string> | null = null;
  readonly #params: ReturnType<typeof dominantParams>;

  constructor(identities: BasicIdentityConfig[]) {
    this.#entries = identities.map((i) => ({
      id: i.id,
      username: i.username,
      digest: sha256(i.username),
      hash: parsePhcParams(i.password) ? i.password : null,
    }));
    this.#params = dominantParams(identities);
    // With no identities nothing loads argon2 (~17 MiB) until someone tries Basic credentials.
    if (identities.length > 0) this.#dummyHash();
  }

  #dummyHash(): Promise<string> {
    if (this.#dummy) return this.#dummy;
    const secret = crypto.getRandomValues(new Uint8Array(32));
    this.#dummy = hashPassword(btoa(String.fromCharCode(...secret)), this.#params);
    // A failure surfaces on the first verify; until then it must not count as unhandled.
    this.#dummy.catch(() => {});
    return this.#dummy;
  }

  async verify(username: string, password: string): Promise<Identity | null> {
    const wanted = sha256(username);
    let found: Entry | null = null;
    // No early exit: the loop's cost does not depend on where (or whether) the user is found.
    for (const e of this.#entries) {
      const same = timingSafeEqual(e.digest, wanted);
      if (same && found === null) found = e;
    }
    const dummy = await this.#dummyHash();
    const target = found?.hash ?? dummy;
    const ok = await verifyPassword(target, password);
    if (!ok || found === null || found.hash === null) return null;
    return { id: found.id, username: found.username, provider: "basic" };
  }
}
