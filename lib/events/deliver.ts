// One HTTP delivery of an event to a webhook: POST of the JSON body, signed with HMAC-SHA256
// of the body under the webhook's token. The receiver's answer body is never read (a slow or
// garbage body cannot hold a worker), and the whole call is bounded by timeout_ms. Redirects
// are not followed (a delivery would land where the config did not send it): a 3xx is a failed
// delivery, whose reason says when it pointed at an address the outbound guard refuses.
import { createHmac } from "node:crypto";
import type { EventWebhookConfig } from "../config/mod.ts";
import { Http1Client, Http1Error, OutboundGuard, proxyConfigured } from "../http/mod.ts";

export const SIGNATURE_HEADER = "X-Svc-Signature-256";

export function signature(token: string, body: string): string {
  return `sha256=${createHmac("sha256", token).update(body).digest("hex")}`;
}

export class DeliveryError extends Error {
  constructor(message: string, readonly status: number | null) {
    super(message);
  }
}

/** Resolves on a 2xx answer; throws DeliveryError otherwise (status null: no answer). */
export async function deliver(
  hook: EventWebhookConfig,
  body: string,
  eventId: string,
  kind: string,
): Promise<void> {
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    "User-Agent": "wharf-webhooks/1",
    "X-Svc-Event-Id": eventId,
    "X-Svc-Event-Kind": kind,
  };
  if (hook.token) headers[SIGNATURE_HEADER] = signature(hook.token, body);
  let status: number;
  let location: string | null;
  try {
    ({ status, location } = proxyConfigured() ? await viaFetch(hook, headers, body) : answerOf(
      await client.request({
        method: "POST",
        url: hook.url,
        headers,
        body: encoder.encode(body),
        timeoutMs: hook.timeoutMs,
      }),
    ));
  } catch (e) {
    const why = (e instanceof Http1Error && e.timedOut) ||
        (e instanceof DOMException && e.name === "TimeoutError")
      ? `no answer within ${hook.timeoutMs} ms`
      : (e as Error).message;
    throw new DeliveryError(`webhook ${hook.name}: ${why}`, null);
  }
  if (status < 200 || status > 299) {
    throw new DeliveryError(
      `webhook ${hook.name} answered ${status}${redirectNote(hook, status, location)}`,
      status,
    );
  }
}

function redirectNote(hook: EventWebhookConfig, status: number, location: string | null): string {
  if (status < 300 || status > 399 || location === null) return "";
  let target: URL;
  try {
    target = new URL(location, hook.url);
  } catch {
    return " (a redirect without a usable Location)";
  }
  // Judged from the URL alone: no DNS query for a host that will not be contacted.
  const refused = new OutboundGuard({ configured: [hook.url] }).refusalOf(target);
  return refused
    ? `: a redirect to ${refused.target}, refused: ${refused.reason}`
    : ` (a redirect to ${target.origin}${target.pathname}, not followed)`;
}

function answerOf(a: { status: number; headers: Map<string, string> }) {
  return { status: a.status, location: a.headers.get("location") ?? null };
}

// Pooled connections, and no copy of the body or Response objects per delivery (see
// lib/http/http1_client.ts for what fetch costs here).
const client = new Http1Client();
const encoder = new TextEncoder();

async function viaFetch(
  hook: EventWebhookConfig,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; location: string | null }> {
  const res = await fetch(hook.url, {
    method: "POST",
    headers,
    body,
    redirect: "manual",
    signal: AbortSignal.timeout(hook.timeoutMs),
  });
  await res.body?.cancel().catch(() => {});
  return { status: res.status, location: res.headers.get("location") };
}
