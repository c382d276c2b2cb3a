// What Wharf knows of each downstream across processes (the status view reads it): what it
// supports, counts of job runs by outcome, the last success and the last error. Lives in KV, not
// in a process, so every process that runs replication jobs adds to the same figures and a
// capability learned by one process spares the others the failed request. The one file of
// lib/replication that holds the KV: these are the folder's own records.
import { K } from "../kv/mod.ts";

/** A remembered capability is asked again after this long (the operator may reconfigure). */
export const CAPS_TTL_MS = 24 * 3600 * 1000;
/** Longest error text kept per downstream. */
const ERROR_MAX = 1000;

/** What a downstream answered to deletes (null: not seen yet), learned for its `url`. */
export interface DownstreamCaps {
  url: string;
  tagDelete: boolean | null;
  digestDelete: boolean | null;
  /** ms since epoch of the last change */
  at: number;
}

/** The last replication job run to a downstream that failed or could not be applied. */
export interface DownstreamError {
  at: number;
  outcome: string;
  message: string;
}

export interface DownstreamFacts {
  caps: DownstreamCaps | null;
  counts: Record<string, number>;
  lastSuccessAt: number | null;
  lastError: DownstreamError | null;
}

export class DownstreamState {
  constructor(private readonly kv: Deno.Kv) {}

  /** The capabilities learned for `url` and still fresh; null members are unknown. */
  async caps(downstream: string, url: string): Promise<DownstreamCaps> {
    const c = (await this.kv.get<DownstreamCaps>(K.replCaps(downstream))).value;
    if (c && c.url === url && Date.now() - c.at < CAPS_TTL_MS) return c;
    return { url, tagDelete: null, digestDelete: null, at: 0 };
  }

  /** Remembers what a downstream answered; a blind write (the last answer is the truth). */
  async learn(
    downstream: string,
    url: string,
    patch: Partial<Pick<DownstreamCaps, "tagDelete" | "digestDelete">>,
  ): Promise<void> {
    const now = await this.caps(downstream, url);
    const next = { ...now, ...patch };
    if (next.tagDelete === now.tagDelete && next.digestDelete === now.digestDelete && now.at > 0) {
      return;
    }
    await this.kv.set(K.replCaps(downstream), { ...next, at: Date.now() });
  }

  /** One finished job run: counted, and remembered as the last success or the last error. */
  async record(downstream: string, outcome: string, error: string | null): Promise<void> {
    const op = this.kv.atomic().sum(K.replCount(downstream, outcome), 1n);
    if (error === null) op.set(K.replOk(downstream), Date.now());
    else {
      op.set(
        K.replError(downstream),
        {
          at: Date.now(),
          outcome,
          message: error.slice(0, ERROR_MAX),
        } satisfies DownstreamError,
      );
    }
    await op.commit();
  }

  async facts(downstream: string, url: string): Promise<DownstreamFacts> {
    const [caps, ok, err] = await this.kv.getMany<[DownstreamCaps, number, DownstreamError]>([
      K.replCaps(downstream),
      K.replOk(downstream),
      K.replError(downstream),
    ]);
    const counts: Record<string, number> = {};
    for await (const e of this.kv.list<Deno.KvU64>({ prefix: K.replCounts(downstream) })) {
      counts[String(e.key[3])] = Number(e.value.value);
    }
    const c = caps.value;
    return {
      caps: c && c.url === url ? c : null,
      counts,
      lastSuccessAt: typeof ok.value === "number" ? ok.value : null,
      lastError: err.value ?? null,
    };
  }
}
