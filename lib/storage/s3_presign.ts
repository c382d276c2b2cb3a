// SigV4 query signing (a presigned GET) done synchronously with node:crypto. aws4fetch signs
// the same way through WebCrypto, whose every call is an async op: its presign cost a blob
// GET's 307 ~0.3-0.4 ms over a HEAD of the same blob even with its signing keys cached (local
// S3 bench, 200 sequential GETs: p50 0.71-0.91 ms against a HEAD's 0.49-0.52). A presign is
// the whole work of a redirected GET, so it is done here; the output is the same URL aws4fetch
// makes, byte for byte (lib/storage/s3_presign_test.ts compares them), and aws4fetch still signs
// every request Wharf sends to S3 itself.
import { createHash, createHmac } from "node:crypto";

export interface PresignCredentials {
  accessKeyId: string;
  secretKey: string;
  sessionToken?: string;
  region: string;
}

/** encodeURIComponent's output with the four characters it leaves that SigV4 encodes too. */
function encodeRfc3986(encoded: string): string {
  return encoded.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export class Presigner {
  /** derived signing keys by day: HMAC chains are the costly part of a signature */
  private readonly keys = new Map<string, Buffer>();

  constructor(private readonly c: PresignCredentials) {}

  /**
   * Signs a GET of `url` (whose query already holds X-Amz-Expires and any response-*
   * overrides) at `now`, and returns the presigned URL.
   */
  presignGet(url: URL, now = new Date()): string {
    const u = new URL(url);
    const datetime = now.toISOString().replace(/[:-]|\.\d{3}/g, "");
    const day = datetime.slice(0, 8);
    const scope = `${day}/${this.c.region}/s3/aws4_request`;
    const q = u.searchParams;
    q.set("X-Amz-Date", datetime);
    if (this.c.sessionToken) q.set("X-Amz-Security-Token", this.c.sessionToken);
    if (!q.has("X-Amz-Expires")) q.set("X-Amz-Expires", "86400");
    q.set("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
    q.set("X-Amz-Credential", `${this.c.accessKeyId}/${scope}`);
    q.set("X-Amz-SignedHeaders", "host");
    let path: string;
    try {
      path = decodeURIComponent(u.pathname.replace(/\+/g, " "));
    } catch {
      path = u.pathname;
    }
    path = encodeRfc3986(encodeURIComponent(path).replace(/%2F/g, "/"));
    const seen = new Set<string>();
    const search = [...q]
      .filter(([k]) => k !== "" && !seen.has(k) && seen.add(k))
      .map(([k, v]) => [encodeRfc3986(encodeURIComponent(k)), encodeRfc3986(encodeURIComponent(v))])
      .sort(([k1, v1], [k2, v2]) => k1 < k2 ? -1 : k1 > k2 ? 1 : v1 < v2 ? -1 : v1 > v2 ? 1 : 0)
      .map(([k, v]) => `${k}=${v}`)
      .join("&");
    const canonical = `GET\n${path}\n${search}\nhost:${u.host}\n\nhost\nUNSIGNED-PAYLOAD`;
    const toSign = `AWS4-HMAC-SHA256\n${datetime}\n${scope}\n${
      createHash("sha256").update(canonical).digest("hex")
    }`;
    q.set("X-Amz-Signature", createHmac("sha256", this.key(day)).update(toSign).digest("hex"));
    return u.toString();
  }

  private key(day: string): Buffer {
    let k = this.keys.get(day);
    if (!k) {
      const h = (key: string | Buffer, data: string) =>
        createHmac("sha256", key).update(data).digest();
      k = h(h(h(h(`AWS4${this.c.secretKey}`, day), this.c.region), "s3"), "aws4_request");
      // One day's key at a time: the map never grows.
      this.keys.clear();
      this.keys.set(day, k);
    }
    return k;
  }
}
