// A checksum for the index tables Wharf writes itself (issue 38): checkpoints.bin (gzip) and
// frames.bin (zstd) end in a trailer of 8 bytes of magic and the sha256 of what precedes it. A
// wrong table would send reads to wrong offsets and serve wrong file bytes, and nothing else
// would notice (the windows and frames they point at are read by range).
//
// Both tables are [u32 count][count × 24-byte entries], and their decoders stop at the count: a
// sealed table still reads with an older Wharf, and a table written before the trailer (exactly
// 4 + 24·count bytes) still reads here, unchecked. The listing document needs none: it is gzip,
// whose CRC-32 every decompression checks (ours and a client's).
import { createHash } from "node:crypto";

const MAGIC = new TextEncoder().encode("WHARFSUM");
const HASH = 32;
const ENTRY = 24;

/** `table` with its trailer. */
export function sealTable(table: Uint8Array): Uint8Array {
  const out = new Uint8Array(table.byteLength + MAGIC.byteLength + HASH);
  out.set(table);
  out.set(MAGIC, table.byteLength);
  out.set(createHash("sha256").update(table).digest(), table.byteLength + MAGIC.byteLength);
  return out;
}

/**
 * The table of a stored file: checked when sealed, as stored when written before seals; null
 * when its bytes do not match its trailer or its length matches neither form (damaged).
 */
export function unsealTable(bytes: Uint8Array): Uint8Array | null {
  if (bytes.byteLength < 4) return null;
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  const body = 4 + n * ENTRY;
  if (bytes.byteLength === body) return bytes;
  if (bytes.byteLength !== body + MAGIC.byteLength + HASH) return null;
  const magic = bytes.subarray(body, body + MAGIC.byteLength);
  if (!magic.every((b, i) => b === MAGIC[i])) return null;
  const want = bytes.subarray(body + MAGIC.byteLength);
  const got = createHash("sha256").update(bytes.subarray(0, body)).digest();
  return got.every((b, i) => b === want[i]) ? bytes.subarray(0, body) : null;
}
