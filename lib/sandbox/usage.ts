// What the last sandbox run used, whichever kind ran it (the hostile bench reports it).

export interface RunUsage {
  /** a process: its peak RSS; a worker: the most heap and ArrayBuffers it reported */
  peakRssBytes: number;
  /** a process: from /proc; a worker: its thread's (NaN for a web Worker) */
  cpuSecs: number;
  wallMs: number;
}

export let lastRun: RunUsage | null = null;

export function recordRun(u: RunUsage): void {
  lastRun = u;
}
