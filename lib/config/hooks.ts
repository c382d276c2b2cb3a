// The operator hooks of issue 14: event webhooks, authorization webhooks and retention policies.
// Types and their TOML readers live here so the section readers (global_config.ts,
// repository_config.ts, auth_config.ts) only call in; a problem names its key path.
// CEL rules are only syntax-checked later, where the functions they call are defined
// (lib/retention): config imports no CEL environment.
import { type Fail, int, only, strings, type Table, table } from "./table_readers.ts";

export const EVENT_KINDS = [
  "manifest.push",
  "manifest.pull",
  "manifest.delete",
  "tag.create",
  "tag.delete",
  "blob.push",
  "blob.delete",
  "scan.completed",
  // Stored bytes that failed verification, taken out of serving (issue 38).
  "blob.corrupt",
  // Signature verification (issue 34): an image held for its signature, verified, released from
  // its hold, deleted when its hold ran out (on_expiry = "delete"), or served unverified (warn).
  "image.held",
  "image.verified",
  "image.released",
  "image.rejected",
  "image.unverified",
  // Every audit trail record ([global.audit]); only webhooks that name it receive it.
  "audit.record",
] as const;
export type EventKind = typeof EVENT_KINDS[number];

/** `[event_webhook.<name>]` */
export interface EventWebhookConfig {
  name: string;
  url: string;
  /** kinds delivered; empty = every kind */
  events: EventKind[];
  /** HMAC-SHA256 key of X-Svc-Signature-256; null = unsigned */
  token: string | null;
  timeoutMs: number;
  /** async: attempts after the first before the delivery is dead-lettered */
  maxRetries: number;
  /** full-match regexes over the namespace; empty = every namespace */
  repositoryFilter: RegExp[];
  /** async: queued and retried; required: called before the operation, a failure fails it */
  policy: "async" | "required";
}

/** `[auth.webhook.<name>]` */
export interface AuthWebhookConfig {
  name: string;
  url: string;
  timeoutMs: number;
  /** request headers copied to the webhook call (e.g. Authorization) */
  forwardHeaders: string[];
  /** how long a 401/403 answer is remembered */
  cacheTtlSecs: number;
}

/** `[global.retention_policy]` / `[repository.<r>.retention_policy]` */
export interface RetentionPolicyConfig {
  /** CEL keep-expressions: a tag is kept when any rule is true (or errors) */
  rules: string[];
  /** the key path of the policy, for messages */
  where: string;
}

/** `[global.retention_policy] interval_secs`: prune inside the server; null = off */
export interface RetentionScheduleConfig {
  intervalSecs: number | null;
  dryRun: boolean;
}

export const EVENT_WEBHOOK_DEFAULTS = { timeoutMs: 5000, maxRetries: 10 } as const;
export const AUTH_WEBHOOK_DEFAULTS = { timeoutMs: 2000, cacheTtlSecs: 60 } as const;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function webhookUrl(v: unknown, key: string, fail: Fail): string {
  if (typeof v !== "string") fail(key, "is required: an http(s) URL");
  let u: URL;
  try {
    u = new URL(v as string);
  } catch {
    fail(key, `"${v}" is not a valid URL`);
  }
  if (u!.protocol !== "http:" && u!.protocol !== "https:") {
    fail(key, `"${v}" must be an http(s) URL`);
  }
  if (u!.username || u!.password) fail(key, "must not carry credentials");
  return v as string;
}

/** `[event_webhook.<name>]` tables. */
export function readEventWebhooks(v: unknown, fail: Fail): EventWebhookConfig[] {
  const out: EventWebhookConfig[] = [];
  for (const [name, raw] of Object.entries(table(v, "event_webhook", fail))) {
    const path = `event_webhook.${name}`;
    if (!NAME.test(name)) fail(path, "name must be 1-64 letters, digits, '.', '_' or '-'");
    const t = table(raw, path, fail);
    only(t, path, [
      "url",
      "events",
      "token",
      "timeout_ms",
      "max_retries",
      "repository_filter",
      "policy",
    ], fail);
    const events = strings(t, "events", path, fail) ?? [];
    events.forEach((e, i) => {
      if (!(EVENT_KINDS as readonly string[]).includes(e)) {
        fail(`${path}.events[${i}]`, `unknown event "${e}" (kinds: ${EVENT_KINDS.join(", ")})`);
      }
    });
    const policy = t.policy ?? "async";
    if (policy !== "async" && policy !== "required") {
      fail(`${path}.policy`, `must be "async" or "required"`);
    }
    if (t.token !== undefined && (typeof t.token !== "string" || t.token === "")) {
      fail(`${path}.token`, "must be a non-empty string");
    }
    const filters = (strings(t, "repository_filter", path, fail) ?? []).map((s, i) => {
      try {
        return new RegExp(`^(?:${s})$`);
      } catch (e) {
        fail(`${path}.repository_filter[${i}]`, `invalid regex: ${(e as Error).message}`);
      }
    });
    out.push({
      name,
      url: webhookUrl(t.url, `${path}.url`, fail),
      events: events as EventKind[],
      token: (t.token as string | undefined) ?? null,
      timeoutMs: int(t, "timeout_ms", path, 1, 600_000, fail) ?? EVENT_WEBHOOK_DEFAULTS.timeoutMs,
      maxRetries: int(t, "max_retries", path, 0, 999, fail) ?? EVENT_WEBHOOK_DEFAULTS.maxRetries,
      repositoryFilter: filters,
      policy,
    });
  }
  return out;
}

/** `[auth.webhook.<name>]` tables. */
export function readAuthWebhooks(v: unknown, fail: Fail): Map<string, AuthWebhookConfig> {
  const out = new Map<string, AuthWebhookConfig>();
  for (const [name, raw] of Object.entries(table(v, "auth.webhook", fail))) {
    const path = `auth.webhook.${name}`;
    const t = table(raw, path, fail);
    only(t, path, ["url", "timeout_ms", "forward_headers", "cache_ttl_secs"], fail);
    const forward = strings(t, "forward_headers", path, fail) ?? [];
    forward.forEach((h, i) => {
      if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(h)) {
        fail(`${path}.forward_headers[${i}]`, `"${h}" is not a header name`);
      }
    });
    out.set(name, {
      name,
      url: webhookUrl(t.url, `${path}.url`, fail),
      timeoutMs: int(t, "timeout_ms", path, 1, 600_000, fail) ?? AUTH_WEBHOOK_DEFAULTS.timeoutMs,
      forwardHeaders: forward.map((h) => h.toLowerCase()),
      cacheTtlSecs: int(t, "cache_ttl_secs", path, 0, 86_400, fail) ??
        AUTH_WEBHOOK_DEFAULTS.cacheTtlSecs,
    });
  }
  return out;
}

/** `authorization_webhook = "<name>"`: must name a configured [auth.webhook.<name>]. */
export function readAuthWebhookRef(
  t: Table,
  path: string,
  hooks: Map<string, AuthWebhookConfig>,
  fail: Fail,
): string | undefined {
  const v = t.authorization_webhook;
  if (v === undefined) return undefined;
  if (typeof v !== "string") fail(`${path}.authorization_webhook`, "must be a string");
  if (!hooks.has(v as string)) {
    fail(
      `${path}.authorization_webhook`,
      `"${v}" is not a configured [auth.webhook.<name>]`,
    );
  }
  return v as string;
}

/** `retention_policy = { rules = [...] }` (and, globally, `interval_secs`, `dry_run`). */
export function readRetention(
  v: unknown,
  path: string,
  global: boolean,
  fail: Fail,
): { policy: RetentionPolicyConfig; schedule: RetentionScheduleConfig } | undefined {
  if (v === undefined) return undefined;
  const t = table(v, path, fail);
  only(t, path, global ? ["rules", "interval_secs", "dry_run"] : ["rules"], fail);
  const rules = strings(t, "rules", path, fail) ?? [];
  if (t.dry_run !== undefined && typeof t.dry_run !== "boolean") {
    fail(`${path}.dry_run`, "must be true or false");
  }
  return {
    policy: { rules, where: path },
    schedule: {
      intervalSecs: int(t, "interval_secs", path, 1, 365 * 86_400, fail) ?? null,
      dryRun: t.dry_run === true,
    },
  };
}
