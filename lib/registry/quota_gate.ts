// Growing commits of one repository under a quota go one at a time in this process. Each such
// commit checks the repository's usage total, which every new digest there rewrites, so
// concurrent pushes conflicted and retried (8 concurrent pushers: a third fewer pushes a
// second, bench/quota_bench.ts); queued here they commit in turn. Processes sharing a KV still
// race, and the commit's check keeps the quota exact between them.
import type { Config } from "../config/schema.ts";
import { repositoryOf } from "../config/repositories.ts";
import { maxBytesOf } from "../quota/mod.ts";
import { KeyedLock } from "./hashers.ts";

export class QuotaGate {
  private readonly lock = new KeyedLock();

  constructor(private readonly cfg: Config) {}

  /** Runs `commit` (a write that may grow `ns`'s usage) after the repository's previous one. */
  run<T>(ns: string, commit: () => Promise<T>): Promise<T> {
    const repo = repositoryOf(this.cfg, ns).name;
    if (maxBytesOf(this.cfg, repo) === null) return commit();
    return this.lock.run(repo, commit);
  }
}
