// serve's HTTP listener, plain (Deno.serve) or TLS (routes/tls_listener.ts), behind one call
// that returns once the listener has drained after the stop signal.
import type { Config } from "../lib/config/mod.ts";
import { log } from "../lib/log.ts";
import type { ConnEnv } from "../routes/app.ts";
import { serveTls } from "../routes/tls_listener.ts";
import { aborted } from "./shutdown.ts";

/** The listening port is taken, or not ours to take: said in one line, nothing opened. */
export class ListenError extends Error {}

export function listenError(cfg: Config, e: unknown): ListenError | null {
  const at = `${cfg.server.bindAddress}:${cfg.server.port}`;
  if (e instanceof Deno.errors.AddrInUse) {
    return new ListenError(
      `${at} is already in use (another Wharf or another service); stop it or set [server] port`,
    );
  }
  if (e instanceof Deno.errors.AddrNotAvailable) {
    return new ListenError(`${at}: no such address on this machine; check [server] bind_address`);
  }
  if (e instanceof Deno.errors.PermissionDenied) {
    return new ListenError(`${at}: not allowed to listen there (${e.message})`);
  }
  return null;
}

/**
 * Binds and releases the port before anything is opened, so a second start on a taken port
 * stops with a line rather than after its job runner started (Deno.serve's own AddrInUse, in a
 * race with another process, is still turned into the same line).
 */
export function probePort(cfg: Config): void {
  if (cfg.server.port === 0) return;
  try {
    Deno.listen({ hostname: cfg.server.bindAddress, port: cfg.server.port }).close();
  } catch (e) {
    throw listenError(cfg, e) ?? e;
  }
}

export type Handler = (req: Request, conn: ConnEnv) => Response | Promise<Response>;

/**
 * Serves `handler` on `[server]`'s address until `signal` aborts, then lets open requests finish
 * (the TLS listener cuts them after its grace); `describe` is the startup line's config account.
 */
export async function listen(
  cfg: Config,
  handler: Handler,
  signal: AbortSignal,
  describe: string,
): Promise<void> {
  if (cfg.server.tls) {
    const tls = await serveTls({
      hostname: cfg.server.bindAddress,
      port: cfg.server.port,
      tls: cfg.server.tls,
      handler: (req, conn, completed) => handler(req, { ...conn, completed }),
      onListen: ({ hostname, port }) => {
        console.log(
          `wharf listening on https://${hostname}:${port} (${describe}; client certificates: ${
            cfg.server.tls!.clientAuth
          })`,
        );
      },
    });
    await aborted(signal);
    await tls.close();
    return;
  }
  const server = Deno.serve(
    {
      hostname: cfg.server.bindAddress,
      port: cfg.server.port,
      signal,
      onListen: ({ hostname, port }) => {
        console.log(`wharf listening on http://${hostname}:${port} (${describe})`);
        console.log("press Ctrl+C to stop");
      },
      onError: (e) => {
        log.error("unhandled server error", { error: e instanceof Error ? e.stack : String(e) });
        return new Response(
          JSON.stringify({
            errors: [{ code: "INTERNAL_ERROR", message: "internal server error", detail: "" }],
          }),
          {
            status: 500,
            headers: { "Content-Type": "application/json" },
          },
        );
      },
    },
    (req, info) =>
      handler(req, {
        remoteAddr: info.remoteAddr.hostname,
        certificate: null,
        // rejects when the client leaves mid-answer: that is an end too
        completed: info.completed.catch(() => {}),
      }),
  );
  await server.finished;
}
