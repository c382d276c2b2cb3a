// `main.ts hash-password`: prints the argon2id hash of the password on standard input, for
// [[auth.users]] password_hash.
import { ConfigError } from "../lib/config/mod.ts";
import { hashPassword } from "../lib/auth/mod.ts";

export async function hashPasswordCommand(): Promise<number> {
  console.log(await hashPassword(await readPassword()));
  return 0;
}

/** The password from standard input (first line), so it never shows in argv or shell history. */
async function readPassword(): Promise<string> {
  if (Deno.stdin.isTerminal()) await Deno.stderr.write(new TextEncoder().encode("password: "));
  const text = await new Response(Deno.stdin.readable).text();
  const pw = text.split(/\r?\n/)[0];
  if (!pw) throw new ConfigError("hash-password: empty password on standard input");
  return pw;
}
