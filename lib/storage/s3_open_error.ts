// An S3 blob store that cannot be opened at startup (issue 35 item 5), said in one line naming
// the setting to look at (`[blob_store.s3] endpoint`, `bucket`, or the credentials), so a command
// can print it as it prints a config error, instead of ending in a stack trace.
import type { S3StoreConfig } from "../config/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import { S3Error } from "./s3_client.ts";

export class BlobStoreOpenError extends Error {
  override readonly name = "BlobStoreOpenError";
}

/** Which setting an S3 failure at startup points to. */
export async function s3OpenError(s3: S3StoreConfig, e: unknown): Promise<BlobStoreOpenError> {
  const endpoint = `[blob_store.s3] endpoint = ${JSON.stringify(s3.endpoint)}`;
  if (e instanceof S3Error) {
    const answer = `${e.status}${e.code ? ` ${e.code}` : ""}`;
    if (e.status === 404 || e.code === "NoSuchBucket") {
      return new BlobStoreOpenError(
        `[blob_store.s3] bucket = ${JSON.stringify(s3.bucket)}: no such bucket at ${s3.endpoint}`,
      );
    }
    if (e.status === 401 || e.status === 403) {
      return new BlobStoreOpenError(
        `[blob_store.s3] access_key_id / secret_key: ${s3.endpoint} refused them for bucket ` +
          `${JSON.stringify(s3.bucket)} (${answer})`,
      );
    }
    return new BlobStoreOpenError(`${endpoint}: S3 answered ${answer} (bucket ${s3.bucket})`);
  }
  // The client retried and gave up: the network (refused, DNS, TLS) or a 5xx each time.
  const why = e instanceof RegistryError ? e.detail : e instanceof Error ? e.message : String(e);
  const cause = networkCause(why);
  const probed = /^fetch failed$/i.test(cause) ? await connectCause(s3.endpoint) : null;
  return new BlobStoreOpenError(`${endpoint}: cannot reach S3 (${probed ?? cause})`);
}

/**
 * fetch says only "fetch failed" and keeps the reason (connection refused, DNS, TLS) in its
 * cause, which the S3 client does not carry: one bounded request to the endpoint recovers it.
 */
async function connectCause(endpoint: string): Promise<string | null> {
  try {
    const res = await fetch(endpoint, { method: "HEAD", signal: AbortSignal.timeout(3_000) });
    await res.body?.cancel();
    return null;
  } catch (e) {
    const c = (e as { cause?: unknown }).cause;
    return c instanceof Error ? networkCause(c.message) : null;
  }
}

/** The cause of a failed S3 request without the store, request and URL named before it. */
function networkCause(detail: string): string {
  const cause = detail
    .split("\n")[0]
    .replace(/^(blob store unavailable|.*? is (unreachable|unavailable|failing)): /, "")
    .replace(/^[A-Z]+ [^:]*: /, "")
    .replace(/error sending request for url \([^)]*\): ?/, "")
    .replace(/; retry later$/, "")
    .trim();
  return (cause || "unreachable").slice(0, 300);
}
