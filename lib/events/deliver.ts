// One HTTP delivery of an event to a webhook: POST of the JSON body, signed with HMAC-SHA256
// of the body under the webhook's token. The receiver's answer body is never read (a slow or
// garbage body cannot hold a worker), and the whole call is bounded by timeout_ms.
import { createHmac } from "node:crypto";
import type { EventWebhookConfig } from "../config/mod.ts";

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
  let res: Response;
  try {
    res = await fetch(hook.url, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(hook.timeoutMs),
    });
  } catch (e) {
    const why = e instanceof DOMException && e.name === "TimeoutError"
      ? `no answer within ${hook.timeoutMs} ms`
      : (e as Error).message;
    throw new DeliveryError(`webhook ${hook.name}: ${why}`, null);
  }
  await res.body?.cancel().catch(() => {});
  if (res.status < 200 || res.status > 299) {
    throw new DeliveryError(`webhook ${hook.name} answered ${res.status}`, res.status);
  }
}
