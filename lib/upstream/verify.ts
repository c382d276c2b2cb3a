// Fetched bytes against the digest they were asked for or announced under. A manifest is
// checked whole; a blob as it streams past (the caller tees it to a client and the store): the
// stream errors at its end, so a consumer that commits only on a clean end keeps no bad bytes.
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
