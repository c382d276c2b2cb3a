// Fetched bytes against the digest they were asked for or announced under. A manifest is
// checked whole; a blob as it streams past to a client: the stream errors at its end, before its
// last bytes, so a client never takes a wrong blob for a whole one.
import { parseDigest } from "../oci/mod.ts";
import { digestBytes, Hasher } from "../streams/mod.ts";
import { UpstreamError } from "./errors.ts";

/**
 * The digest of manifest `bytes` fetched by `reference`, or what disagrees. A digest reference
 * must be their hash in its algorithm. For a tag, `announced` (Docker-Content-Digest), when
 * sent, must be their hash in its own algorithm; the tag's digest is their sha256.
 */
export function manifestDigest(
  bytes: Uint8Array,
  reference: string,
  announced: string | null,
): { digest: string } | { expected: string; actual: string } {
  const ref = parseDigest(reference);
  const claimed = ref ? reference : announced;
  const digest = ref ? reference : digestBytes("sha256", bytes);
  if (claimed !== null) {
    const actual = digestBytes(parseDigest(claimed)!.algorithm, bytes);
    if (actual !== claimed) return { expected: claimed, actual };
  }
  return { digest };
}

/** Does `announced` (a valid digest) name other content than `digest`? Only comparable within
 * one algorithm. */
export function namesOtherContent(digest: string, announced: string): boolean {
  const [a, b] = [parseDigest(digest), parseDigest(announced)];
  return a !== null && b !== null && a.algorithm === b.algorithm && a.hex !== b.hex;
}

/**
 * `body`, erroring at its end with `digest-mismatch` unless its bytes hash to `digest`, and as
 * soon as it passes `limit` bytes. Its last chunk is held back until the hash matched, so a
 * client reading it (a pull passed through uncached) never sees all the bytes of a wrong blob
 * end cleanly: with a Content-Length, it sees a short body.
 */
export function verifyDigest(
  body: ReadableStream<Uint8Array>,
  digest: string,
  upstream: string,
  limit = Number.MAX_SAFE_INTEGER,
): ReadableStream<Uint8Array> {
  const d = parseDigest(digest);
  if (!d) throw new UpstreamError("invalid", upstream, `not a digest: ${JSON.stringify(digest)}`);
  const hasher = new Hasher(d.algorithm);
  let held: Uint8Array | null = null;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        if (chunk.byteLength === 0) return;
        hasher.update(chunk);
        if (hasher.bytes > limit) {
          throw new UpstreamError(
            "invalid",
            upstream,
            `blob ${digest}: more than the ${limit} bytes expected`,
          );
        }
        if (held) c.enqueue(held);
        held = chunk;
      },
      flush(c) {
        const actual = hasher.peek();
        if (actual !== digest) {
          throw new UpstreamError(
            "digest-mismatch",
            upstream,
            `blob ${digest}: digest mismatch: ${hasher.bytes} bytes hash to ${actual}`,
          );
        }
        if (held) c.enqueue(held);
      },
    }),
  );
}
