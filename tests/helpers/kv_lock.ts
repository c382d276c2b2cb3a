// Another process holding a KV file's SQLite write lock (an operator's sqlite3 shell inside a
// transaction, a stuck tool): the way found to make a running server's KV refuse writes as root,
// where file modes are ignored and a file's or mount's read-only flag does not reach descriptors
// already open (lib/kv/kv_faults.ts). Reads go on meanwhile (WAL).

const HOLDER = `
import { DatabaseSync } from "node:sqlite";
const db = new DatabaseSync(Deno.args[0]);
db.exec("PRAGMA busy_timeout = 10000");
db.exec("BEGIN IMMEDIATE");
console.log("locked");
for await (const _ of Deno.stdin.readable) { /* until the test closes stdin */ }
db.exec("ROLLBACK");
db.close();
`;

export interface KvLock {
  /** ends the transaction and the process */
  release(): Promise<void>;
}

/** Takes the write lock of the KV file at `path` from another process; resolves once held. */
export async function holdKvLock(path: string): Promise<KvLock> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", HOLDER, path],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  const reader = child.stdout.getReader();
  let out = "";
  const dec = new TextDecoder();
  while (!out.includes("locked")) {
    const r = await reader.read();
    if (r.done) {
      const err = dec.decode((await child.output().catch(() => null))?.stderr);
      throw new Error(`the lock holder exited: ${out} ${err}`);
    }
    out += dec.decode(r.value, { stream: true });
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  child.stderr.cancel().catch(() => {});
  return {
    async release() {
      await writer.close().catch(() => {});
      await child.status;
    },
  };
}
