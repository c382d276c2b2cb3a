// A blob's bytes are checked as they stream past (the caller tees them to a client and the
// store): the stream errors at its end when they do not hash to the digest, so a consumer that
// commits only on a clean end never keeps bad bytes.
import { parseDigest } from "../oci/mod.ts";
import { Hasher } from "../streams/mod.ts";
import { UpstreamError } from "./errors.ts";

/** `body`, erroring at its end with `digest-mismatch` unless its bytes hash to `digest`. */
export function verifyDigest(
  body: ReadableStream<Uint8Array>,
  digest: string,
  upstream: string,
): ReadableStream<Uint8Array> {
  const d = parseDigest(digest);
  if (!d) throw new UpstreamError("invalid", upstream, `not a digest: ${JSON.stringify(digest)}`);
  const hasher = new Hasher(d.algorithm);
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        hasher.update(chunk);
        c.enqueue(chunk);
      },
      flush() {
        const actual = hasher.peek();
        if (actual !== digest) {
          throw new UpstreamError(
            "digest-mismatch",
            upstream,
            `blob ${digest}: digest mismatch: ${hasher.bytes} bytes hash to ${actual}`,
          );
        }
      },
    }),
  );
}
