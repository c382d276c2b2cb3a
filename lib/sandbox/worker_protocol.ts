// The messages between lib/sandbox/worker.ts and a child entry running as a worker (child.ts).
// The worker asks, the parent answers: nothing is posted to a worker that is not listening yet,
// and input moves one chunk per request, so it never piles up in the worker's queue.

export type ToChild =
  | {
    init: {
      args: unknown;
      maxOutputBytes: number;
      /** max_memory_bytes, for the heap and ArrayBuffers together */
      memoryBytes: number;
      /** the worker's V8 heap cap, which it stops short of itself (see worker.ts) */
      heapBytes: number;
    };
  }
  | { chunk: Uint8Array }
  | { end: true }
  | { inputError: string };

export type ToParent =
  | { hello: true }
  | { pull: true }
  | { cancel: true }
  /** heap and ArrayBuffers of the worker; `over` once past max_memory_bytes or its heap cap */
  | { memory: number; over?: true }
  | { line: Uint8Array }
  /** the line would be this long, past the output budget */
  | { overflow: number };
