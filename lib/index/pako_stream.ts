// pako's inflate stream as this folder drives it by hand (pako 2.1.0, lib/zlib/zstream.js and
// inflate.js): the checkpoint pass (gzip_checkpoints.ts) stops it at block boundaries and reads
// its state; the reader (gzip_read.ts) inflates a member's tail with it to learn where it ends.

export const Z_STREAM_END = 1;
export const Z_BUF_ERROR = -5;

export interface PakoStream {
  input: Uint8Array;
  next_in: number;
  avail_in: number;
  output: Uint8Array;
  next_out: number;
  avail_out: number;
  data_type: number;
  msg: string;
  state: {
    window: Uint8Array | null;
    mode: number;
    last: boolean | number;
    bits: number;
    back: number;
    length: number;
    was: number;
    lencode: unknown;
    lendyn: unknown;
  };
}
