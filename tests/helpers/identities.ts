// Basic identities for a test server's config, hashed with cheap argon2 parameters: these tests
// are about what an identity may do, not hashing cost (lib/auth/basic_test.ts covers that).
import { hashPassword } from "../../lib/auth/mod.ts";

const FAST_ARGON2 = { memoryCost: 1024, timeCost: 1, parallelism: 1 };

/** An `[auth.identity.<id>]` table per entry of `passwords`, its username the id. */
export async function identityTables(passwords: Record<string, string>): Promise<string> {
  let out = "";
  for (const [id, pw] of Object.entries(passwords)) {
    const hash = await hashPassword(pw, FAST_ARGON2);
    out += `\n[auth.identity.${id}]\nusername = "${id}"\npassword = "${hash}"\n`;
  }
  return out;
}
