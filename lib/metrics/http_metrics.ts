// The edge's instruments: requests by action and status, bytes in and out, authentication, the
// rate limiter's refusals and the authorization webhook's decisions.
import { Counter, Gauge, Histogram, MetricGroup } from "./instruments.ts";

/** Request latency: a manifest HEAD from KV (~0.5 ms) up to a slow blob upload (30 s). */
export const REQUEST_BUCKETS = [
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
];

export type AuthResultLabel = "ok" | "failed" | "anonymous";

/** What the edge (routes/metrics.ts, lib/ratelimit, lib/auth) reports. */
export class HttpMetrics extends MetricGroup {
  readonly requests = this.set.add(
    new Counter(
      "wharf_http_requests_total",
      "HTTP requests answered, by action, method and status",
      [
        "action",
        "method",
        "status",
      ],
    ),
  );

  readonly requestDuration = this.set.add(
    new Histogram(
      "wharf_http_request_duration_seconds",
      "Time from request to response headers, by action",
      ["action"],
      REQUEST_BUCKETS,
    ),
  );

  readonly inFlight = this.set.add(
    new Gauge(
      "wharf_http_requests_in_flight",
      "Requests being handled (up to response headers)",
      [],
    ),
  );

  /** 429s of the rate limiter (lib/ratelimit), by bucket class: requests or pulls */
  readonly rateLimited = this.set.add(
    new Counter(
      "wharf_rate_limited_requests_total",
      "Requests refused with 429 by the rate limits, by class (requests, pulls)",
      ["class"],
    ),
  );

  /** KV operations of the rate limiter's settles and first loads, by kind */
  readonly rateLimitKvOps = this.set.add(
    new Counter(
      "wharf_rate_limit_kv_operations_total",
      "KV operations made by the rate limiter (gets, commits, conflicts)",
      ["op"],
    ),
  );

  readonly requestBytes = this.set.add(
    new Counter("wharf_http_request_bytes_total", "Request body bytes read by handlers", []),
  );

  readonly responseBytes = this.set.add(
    new Counter("wharf_http_response_bytes_total", "Response body bytes streamed to clients", []),
  );

  readonly authAttempts = this.set.add(
    new Counter("wharf_auth_attempts_total", "Authentication attempts by method and result", [
      "method",
      "result",
    ]),
  );

  private readonly authzWebhookDecisions = this.set.add(
    new Counter(
      "wharf_authorization_webhook_decisions_total",
      "Authorization webhook decisions by webhook and decision (allow, deny, cached-deny, error)",
      ["webhook", "decision"],
    ),
  );

  private readonly authzWebhookDuration = this.set.add(
    new Histogram(
      "wharf_authorization_webhook_duration_seconds",
      "Authorization webhook calls (cached denials excluded) by webhook",
      ["webhook"],
      REQUEST_BUCKETS,
    ),
  );

  // Hot-path series kept once so a request does one Map lookup per labelled instrument.
  private readonly inFlightS = this.inFlight.series([]);
  private readonly requestBytesS = this.requestBytes.series([]);
  private readonly responseBytesS = this.responseBytes.series([]);

  requestStarted(): void {
    this.inFlightS.v++;
  }

  /** A response's headers are out (or the request failed before any). */
  requestFinished(action: string, method: string, status: number, seconds: number): void {
    this.inFlightS.v--;
    this.requests.inc([action, method, String(status)]);
    this.requestDuration.observe(seconds, [action]);
  }

  bytesIn(n: number): void {
    this.requestBytesS.v += n;
  }

  bytesOut(n: number): void {
    this.responseBytesS.v += n;
  }

  authAttempt(method: string, result: AuthResultLabel): void {
    this.authAttempts.inc([method, result]);
  }

  /** Callback for the authorization webhook (lib/auth AuthorizationWebhooks). */
  readonly observeAuthzWebhook = (webhook: string, decision: string, seconds: number): void => {
    this.authzWebhookDecisions.inc([webhook, decision]);
    if (decision !== "cached-deny") this.authzWebhookDuration.observe(seconds, [webhook]);
  };
}
