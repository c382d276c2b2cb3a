// Reads from a checkpoint (gzip_checkpoints.ts's head): the compressed bytes a read needs, and
// the stream inflating them: the window's prefix spliced onto the blob's bits, a cut range
// through DecompressionStream, a range to the blob's end through pako, then node:zlib for the
// members after it.
import * as zinf from "pako-inflate";
import ZStream from "pako-zstream";
import zlib from "node:zlib";
import type { CheckpointRef } from "./checkpoint_table.ts";
import {
  FINAL_EMPTY_BLOCK,
  finalBlockAfter,
  resumePrefix,
  storedWindow,
} from "./deflate_prefix.ts";
import { type PakoStream, Z_BUF_ERROR, Z_STREAM_END } from "./pako_stream.ts";
import { concatStreams, pipeNode } from "./stream_pipes.ts";

/**
 * The blob bytes [start, end] a read from `cp` needs, and whether they stop at `next` (the
 * checkpoint after the read's last byte, when in the same member) rather than the blob's end.
 * A checkpoint k bits into a byte starts with that byte.
 */
export function compressedRange(
  cp: Pick<CheckpointRef, "coff" | "bits">,
  next: Pick<CheckpointRef, "coff" | "member"> | null,
  blobSize: number,
): { start: number; end: number; cut: boolean } {
  const cut = next !== null && !next.member;
  return { start: cp.coff - (cp.bits ? 1 : 0), end: cut ? next.coff - 1 : blobSize - 1, cut };
}

/**
 * The raw deflate stream of a read from a checkpoint `bits` into a byte: the prefix, its
 * partial last byte merged with the range's first byte; with `nextBits` (a cut range), the last
 * byte is held back and ends in a final empty block. The rest passes through as it comes.
 */
function spliced(
  prefix: Uint8Array,
  bits: number,
  compressed: ReadableStream<Uint8Array>,
  next: Pick<CheckpointRef, "bits" | "fixed" | "final"> | null,
): ReadableStream<Uint8Array> {
  const nextBits = next === null ? null : next.bits;
  const reader = compressed.getReader();
  const keep = bits ? (1 << (8 - bits)) - 1 : 0;
  let first = true;
  let held = -1;
  let done = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      // A pull that enqueues nothing is not called again (highWaterMark 0): it reads on instead.
      let sent = false;
      const send = (b: Uint8Array) => {
        if (b.length) c.enqueue(b);
        sent ||= b.length > 0;
      };
      while (!sent) {
        if (done) return c.close();
        const r = await reader.read();
        if (r.done) {
          done = true;
          if (first && bits) throw new Error("gzip: compressed range cut short");
          if (first) send(prefix);
          if (next !== null) send(finalBlockAfter(held, next.bits, next));
          return c.close();
        }
        let v = r.value;
        if (v.length === 0) continue;
        if (first) {
          first = false;
          if (bits) {
            const head = prefix.slice();
            const at = head.length - 1;
            head[at] = (head[at] & keep) | (v[0] & ~keep & 0xff);
            if (nextBits !== null && v.length === 1) {
              // the range's one byte is also its last: the merged byte is held back
              send(head.subarray(0, at));
              held = head[at];
              continue;
            }
            send(head);
            v = v.subarray(1);
          } else send(prefix);
        }
        if (nextBits === null) {
          send(v);
          continue;
        }
        if (held >= 0) send(Uint8Array.of(held));
        held = v[v.length - 1];
        send(v.subarray(0, v.length - 1));
      }
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}

/**
 * Inflates from a checkpoint: `compressed` streams the blob's `compressedRange` (to the end of
 * the blob, or with `next` up to that checkpoint's block boundary in the same member); returns
 * the uncompressed bytes from `cp.uoff` on (the window is consumed, not emitted).
 *
 * A cut range goes through the web DecompressionStream (deflate-raw), ~3× node:zlib here for
 * the ~2 MiB an average read inflates; the gzip header of a member start is skipped by hand. A
 * range to the blob's end (the last checkpoint's segment) holds a gzip trailer and maybe more
 * members, which only node:zlib reads without losing output.
 */
export function inflateFrom(
  window: Uint8Array,
  cp: Pick<CheckpointRef, "member" | "bits" | "fixed" | "final">,
  compressed: ReadableStream<Uint8Array>,
  next: Pick<CheckpointRef, "bits" | "fixed" | "final"> | null = null,
): ReadableStream<Uint8Array> {
  const member = cp.member;
  const bits = member ? 0 : cp.bits;
  // Inside the last block, the prefix's header is final too: the stream then ends where the
  // blob's does, before its trailer (to the blob's end), or at a cut's end-of-block.
  const fixed = !member && cp.fixed ? { final: cp.final === true } : undefined;
  if (next === null) {
    if (member) return pipeNode(compressed, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0);
    const raw = bits || fixed
      ? spliced(resumePrefix(window, bits, fixed), bits, compressed, null)
      : concatStreams(storedWindow(window), compressed);
    return rawThenMembers(window.length, raw);
  }
  const body = member ? skipGzipHeader(compressed) : compressed;
  const raw = bits || next.bits || fixed || next.fixed
    ? spliced(resumePrefix(window, bits, fixed), bits, body, next)
    : concatStreams(member ? new Uint8Array(0) : storedWindow(window), body, FINAL_EMPTY_BLOCK);
  let skip = member ? 0 : window.length;
  return raw.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        for (let i = 0; i < chunk.length; i += 16 * 1024) {
          c.enqueue(chunk.subarray(i, i + 16 * 1024));
        }
      },
    }),
  ).pipeThrough(
    new DecompressionStream("deflate-raw") as unknown as TransformStream<Uint8Array, Uint8Array>,
  ).pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          return;
        }
        c.enqueue(skip ? chunk.subarray(skip) : chunk);
        skip = 0;
      },
    }),
  );
}

/**
 * The rest of a member from a checkpoint inside it (`raw`: the window's prefix, then the blob
 * from the checkpoint on), then every member after it. node:zlib's inflateRaw stops at the end
 * of the deflate stream and cannot say where that was, so a read from the last checkpoint of one
 * member into the next (multi-member gzip: eStargz layers, BGZF, concatenated files) lost
 * everything past the member's end. pako reports where the deflate stream ended; it inflates at
 * most one checkpoint spacing of output before node:zlib's gunzip takes the members that follow.
 */
function rawThenMembers(
  windowLength: number,
  raw: ReadableStream<Uint8Array>,
): ReadableStream<Uint8Array> {
  const reader = raw.getReader();
  const zs = new (ZStream as unknown as new () => PakoStream)();
  zinf.inflateInit2(zs, -15);
  const out = new Uint8Array(64 * 1024);
  zs.output = out;
  zs.next_out = 0;
  zs.avail_out = out.length;
  zs.input = new Uint8Array(0);
  zs.next_in = 0;
  zs.avail_in = 0;
  let skip = windowLength;
  let rest: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let closed = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        if (closed) return c.close();
        if (rest) {
          const r = await rest.read();
          return r.done ? c.close() : c.enqueue(r.value);
        }
        if (zs.avail_in === 0) {
          const { value, done } = await reader.read();
          if (done) throw new Error("gzip: unexpected end of file");
          zs.input = value;
          zs.next_in = 0;
          zs.avail_in = value.length;
        }
        const r = zinf.inflate(zs, 0);
        let emit: Uint8Array | null = null;
        if (zs.next_out > skip) emit = out.slice(skip, zs.next_out);
        skip = Math.max(0, skip - zs.next_out);
        zs.next_out = 0;
        zs.avail_out = out.length;
        if (r === Z_STREAM_END) {
          const left = zs.input.subarray(zs.next_in);
          zs.avail_in = 0;
          const members = await afterTrailer(left, reader);
          if (members) {
            rest = pipeNode(members, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0)
              .getReader();
          } else closed = true;
        } else if (r < 0 && r !== Z_BUF_ERROR) {
          throw new Error(`gzip: ${zs.msg || `inflate error ${r}`}`);
        }
        if (emit) return c.enqueue(emit);
      }
    },
    async cancel(reason) {
      await rest?.cancel(reason).catch(() => {});
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}

/** The stream after a member's 8-byte trailer, or null when nothing follows it. */
async function afterTrailer(
  left: Uint8Array,
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<ReadableStream<Uint8Array> | null> {
  let trailer = 8;
  let first = left;
  for (;;) {
    const k = Math.min(trailer, first.length);
    trailer -= k;
    first = first.subarray(k);
    if (first.length > 0) break;
    const { value, done } = await reader.read();
    if (done) return null;
    first = value;
  }
  return concatStreams(
    first,
    new ReadableStream<Uint8Array>({
      async pull(c) {
        const r = await reader.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    }, { highWaterMark: 0 }),
  );
}

/** RFC 1952 member header length of `b`, or -1 when more bytes are needed; throws if invalid. */
function gzipHeaderLength(b: Uint8Array): number {
  if (b.length < 10) return -1;
  if (b[0] !== 0x1f || b[1] !== 0x8b || b[2] !== 8) throw new Error("not a gzip member");
  const flags = b[3];
  let at = 10;
  if (flags & 4) {
    if (b.length < at + 2) return -1;
    at += 2 + (b[at] | (b[at + 1] << 8));
  }
  for (const bit of [8, 16]) {
    if (flags & bit) {
      const z = b.indexOf(0, at);
      if (z < 0) return -1;
      at = z + 1;
    }
  }
  if (flags & 2) at += 2;
  return b.length >= at ? at : -1;
}

function skipGzipHeader(s: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = s.getReader();
  let pending: Uint8Array | null = new Uint8Array(0);
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      while (pending) {
        const { value, done } = await reader.read();
        if (done) throw new Error("gzip header cut short");
        const joined: Uint8Array = new Uint8Array(pending.length + value.length);
        joined.set(pending);
        joined.set(value, pending.length);
        const n = gzipHeaderLength(joined);
        if (n < 0) {
          if (joined.length > 128 * 1024) throw new Error("gzip header too long");
          pending = joined;
          continue;
        }
        pending = null;
        if (n < joined.length) c.enqueue(joined.subarray(n));
        return;
      }
      const { value, done } = await reader.read();
      if (done) c.close();
      else c.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}
