// A V8 inspector session with a server started with WHARF_SERVER_INSPECT, for the profiling
// benches (hostile_profile.ts, rate_limit_profile.ts): the Chrome DevTools protocol over the
// inspector's WebSocket, one request at a time.

/** The parts of a V8 CPU profile the benches read. */
export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface Inspector {
  call(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Profiler.start with the sampling interval (µs) */
  startProfile(intervalUs: number): Promise<void>;
  stopProfile(): Promise<Profile>;
  close(): void;
}

/** Connects to the first target of the inspector listening on `address` (host:port). */
export async function openInspector(
  address = Deno.env.get("WHARF_SERVER_INSPECT") ?? "127.0.0.1:9339",
): Promise<Inspector> {
  const list = await (await fetch(`http://${address}/json/list`)).json();
  const ws = new WebSocket(list[0].webSocketDebuggerUrl);
  await new Promise((r) => ws.onopen = r);
  let id = 0;
  const pending = new Map<number, (v: Record<string, unknown>) => void>();
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.id && pending.has(d.id)) {
      pending.get(d.id)!(d.result);
      pending.delete(d.id);
    }
  };
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((r) => {
      const i = ++id;
      pending.set(i, r);
      ws.send(JSON.stringify({ id: i, method, params }));
    });
  return {
    call,
    async startProfile(intervalUs) {
      await call("Profiler.enable");
      await call("Profiler.setSamplingInterval", { interval: intervalUs });
      await call("Profiler.start");
    },
    async stopProfile() {
      return (await call("Profiler.stop")).profile as Profile;
    },
    close: () => ws.close(),
  };
}
