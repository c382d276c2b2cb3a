// How a walk's failures are told apart: a limit the layer passed (IndexError), data the decoder
// refused, and anything else. The walk's outcome depends on which: a partial listing, a second
// pass with node:zlib, or the job failing.

export class IndexError extends Error {
  constructor(message: string, readonly permanent: boolean) {
    super(message);
  }
}

/** Corrupt or truncated gzip or zstd data, as the native decoders report it. */
export class CompressedDataError extends Error {
  readonly code = "Z_DATA_ERROR";
}

export function isDecodeError(e: unknown): boolean {
  // node:zlib reports corrupt or truncated input with a code (Z_DATA_ERROR, Z_BUF_ERROR, ZSTD_…).
  const code = (e as { code?: unknown })?.code;
  return typeof code === "string" && /^(Z_|ZSTD_|ERR_)/.test(code) ||
    (e instanceof Error && /unexpected end|incorrect header|invalid|corrupt/i.test(e.message));
}
