// Bearer tokens per (upstream, scope): a pull of one image is dozens of requests under one
// scope, and a token service is slower than the registry it guards, so each token is fetched
// once and reused until shortly before it expires. Concurrent misses share one fetch.

export interface IssuedToken {
  token: string;
  expiresInSecs: number;
}

interface Entry {
  token: string;
  /** ms since the epoch after which the token is fetched anew */
  refreshAt: number;
}

/** Tokens are dropped this much before they expire: at most 30 s, and a tenth of their life. */
export function refreshMarginMs(expiresInSecs: number): number {
  return Math.min(30_000, expiresInSecs * 100);
}

export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<string>>();

  /** `now` is injectable so tests can age tokens without waiting. */
  constructor(private readonly now: () => number = Date.now) {}

  private static key(upstream: string, scope: string): string {
    return `${upstream}\n${scope}`;
  }

  get(upstream: string, scope: string): string | null {
    const key = TokenCache.key(upstream, scope);
    const e = this.entries.get(key);
    if (!e) return null;
    if (this.now() >= e.refreshAt) {
      this.entries.delete(key);
      return null;
    }
    return e.token;
  }

  set(upstream: string, scope: string, issued: IssuedToken): void {
    const ms = issued.expiresInSecs * 1000;
    if (!(ms > 0)) return;
    this.entries.set(TokenCache.key(upstream, scope), {
      token: issued.token,
      refreshAt: this.now() + ms - refreshMarginMs(issued.expiresInSecs),
    });
  }

  /** Forgets a token the upstream refused (revoked, or issued for another realm). */
  delete(upstream: string, scope: string, token?: string): void {
    const key = TokenCache.key(upstream, scope);
    if (token === undefined || this.entries.get(key)?.token === token) this.entries.delete(key);
  }

  /** The cached token, or the one `fetch` returns (one fetch at a time per key). */
  async getOrFetch(
    upstream: string,
    scope: string,
    fetch: () => Promise<IssuedToken>,
  ): Promise<string> {
    const cached = this.get(upstream, scope);
    if (cached !== null) return cached;
    const key = TokenCache.key(upstream, scope);
    let p = this.pending.get(key);
    if (!p) {
      p = fetch().then((issued) => {
        this.set(upstream, scope, issued);
        return issued.token;
      }).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return await p;
  }

  get size(): number {
    return this.entries.size;
  }
}
