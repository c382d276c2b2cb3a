// The one stop path of the long-running commands (serve on either listener, worker): a signal
// aborts, the listener drains, then the services stop their background work and close.
import type { Services } from "../lib/services/mod.ts";

/**
 * Aborts on SIGTERM or SIGINT, saying `message` once and calling `onStop` first. Listening starts
 * now, before the startup line: a stop sent as soon as that line shows is a stop, not a kill.
 */
export function stopSignal(message: string, onStop: () => void = () => {}): AbortSignal {
  const ac = new AbortController();
  const stop = () => {
    if (ac.signal.aborted) return;
    console.log(message);
    onStop();
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  return ac.signal;
}

/** Running jobs finish (or their grace runs out), the outbox and stores close, then one line. */
export async function closeServices(services: Services, name: string): Promise<void> {
  await services.close();
  console.log(`${name} stopped`);
}

export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}
