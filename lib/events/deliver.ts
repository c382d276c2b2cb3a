// One HTTP delivery of an event to a webhook: POST of the JSON body, signed with HMAC-SHA256
// of the body under the webhook's token. The receiver's answer body is never read (a slow or
// garbage body cannot hold a worker), and the whole call is bounded by timeout_ms.
import { createHmac } from "node:crypto";
import type { EventWebhookConfig } from "../config/mod.ts";
import { PostClient, PostError } from "./http_post.ts";

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
  try {
    status = proxied() ? await viaFetch(hook, headers, body) : await client.post(
      hook.url,
      headers,
      body,
      hook.timeoutMs,
    );
  } catch (e) {
    const why = (e instanceof PostError && e.timedOut) ||
        (e instanceof DOMException && e.name === "TimeoutError")
      ? `no answer within ${hook.timeoutMs} ms`
      : (e as Error).message;
    throw new DeliveryError(`webhook ${hook.name}: ${why}`, null);
  }
  if (status < 200 || status > 299) {
    throw new DeliveryError(`webhook ${hook.name} answered ${status}`, status);
  }
}

const client = new PostClient();

async function viaFetch(
  hook: EventWebhookConfig,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const res = await fetch(hook.url, {
    method: "POST",
    headers,
    body,
    redirect: "manual",
    signal: AbortSignal.timeout(hook.timeoutMs),
  });
  await res.body?.cancel().catch(() => {});
  return res.status;
}

let proxyEnv: boolean | undefined;
/** A proxy in the environment: fetch() applies it (and NO_PROXY), the pooled client does not. */
function proxied(): boolean {
  if (proxyEnv === undefined) {
    try {
      proxyEnv = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
      ]
        .some((k) => !!Deno.env.get(k));
    } catch {
      proxyEnv = false; // no env permission: nothing to honour
    }
  }
  return proxyEnv;
}
