// The one error type of the upstream client. A pull-through cache decides from `kind`, `down`
// and `retryable` alone whether to serve a stale copy, answer 404, or retry a cache job later.

export type UpstreamErrorKind =
  /** connection refused, DNS, TLS */
  | "unreachable"
  /** no response headers within the connect timeout, or a body stalled past the read timeout */
  | "timeout"
  /** 5xx or 429 */
  | "unavailable"
  /** 404 */
  | "not-found"
  /** 401 after authenticating, 403, or credentials the upstream needs but we lack */
  | "denied"
  /** a malformed answer: bad challenge or token response, redirect loop, bad body or JSON */
  | "invalid"
  /** the bytes do not hash to the digest they were fetched or announced under */
  | "digest-mismatch";

const DOWN: ReadonlySet<UpstreamErrorKind> = new Set(["unreachable", "timeout", "unavailable"]);

export interface UpstreamErrorOptions {
  /** the upstream's HTTP status, when one was received (a 416 on a forwarded Range, say) */
  status?: number;
  /** from a 429/503 `Retry-After` (delta-seconds or HTTP date), in seconds from now */
  retryAfterSecs?: number;
  /** overrides the kind's default, e.g. a body cut off mid-transfer is `invalid` yet transient */
  retryable?: boolean;
  /** overrides the kind's default; set by the aggregate of several upstreams */
  down?: boolean;
  /** how the message names the peer (default `upstream <url>`) */
  label?: string;
  cause?: unknown;
}

export class UpstreamError extends Error {
  override readonly name = "UpstreamError";
  readonly kind: UpstreamErrorKind;
  /** the configured URL of the upstream that failed (never with credentials) */
  readonly upstream: string;
  readonly status?: number;
  readonly retryAfterSecs?: number;
  /** worth trying again later: the failure is in the network or the upstream's load */
  readonly retryable: boolean;
  /** the upstream could not answer at all; a cache serves what it has when every one is down */
  readonly down: boolean;

  constructor(
    kind: UpstreamErrorKind,
    upstream: string,
    what: string,
    opts: UpstreamErrorOptions = {},
  ) {
    super(
      `${opts.label ?? `upstream ${upstream}`}: ${what}`,
      opts.cause === undefined ? {} : { cause: opts.cause },
    );
    this.kind = kind;
    this.upstream = upstream;
    if (opts.status !== undefined) this.status = opts.status;
    if (opts.retryAfterSecs !== undefined) this.retryAfterSecs = opts.retryAfterSecs;
    this.down = opts.down ?? DOWN.has(kind);
    this.retryable = opts.retryable ?? this.down;
  }
}

export const isUpstreamError = (e: unknown): e is UpstreamError => e instanceof UpstreamError;

/**
 * Every upstream of a set failed (or one failed in a way that trying another would hide).
 * `kind` is the decisive failure's; `down` only when every upstream tried was down.
 */
export class UpstreamSetError extends UpstreamError {
  readonly errors: readonly UpstreamError[];

  /** `upstreams`: the URLs of the set, comma-separated; `label` names the set in the message */
  constructor(label: string, upstreams: string, errors: UpstreamError[]) {
    super(aggregateKind(errors), upstreams, "", {
      down: errors.length > 0 && errors.every((e) => e.down),
      retryable: errors.some((e) => e.retryable),
      retryAfterSecs: minRetryAfter(errors),
      status: errors.length === 1 ? errors[0].status : undefined,
    });
    this.message = errors.length === 0
      ? `${label}: no upstream configured`
      : `${label}: ${errors.map((e) => e.message).join("; ")}`;
    this.errors = errors;
  }
}

function aggregateKind(errors: UpstreamError[]): UpstreamErrorKind {
  // A failure that stopped the walk (denied, invalid, mismatch) is the answer; otherwise the
  // content is missing wherever an upstream could answer, or everything was down.
  const decisive = errors.find((e) => !e.down && e.kind !== "not-found");
  if (decisive) return decisive.kind;
  if (errors.length === 0 || errors.some((e) => e.kind === "not-found")) return "not-found";
  const kinds = new Set(errors.map((e) => e.kind));
  return kinds.size === 1 ? errors[0].kind : "unavailable";
}

function minRetryAfter(errors: UpstreamError[]): number | undefined {
  const secs = errors.flatMap((e) => e.retryAfterSecs === undefined ? [] : [e.retryAfterSecs]);
  return secs.length ? Math.min(...secs) : undefined;
}

/** `Retry-After` as seconds from now: delta-seconds or an HTTP date; undefined when absent/bad. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (v === null) return undefined;
  const t = v.trim();
  if (/^\d{1,10}$/.test(t)) return Number(t);
  // An HTTP date names its weekday and month; Date.parse alone would take "-1" as a year.
  const at = /[a-z]{3}/i.test(t) ? Date.parse(t) : NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now) / 1000));
}
