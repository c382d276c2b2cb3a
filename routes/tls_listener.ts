// HTTPS listener that can ask for client certificates. Deno.serve/Deno.listenTls cannot request
// them, so this one is node:https with `requestCert`, bridged to a fetch-style handler. Bodies
// stream both ways with backpressure: blob uploads of many GiB pass through here. The bridge is tls_bridge.ts (the request body
// tls_request_body.ts), the client certificate's reading tls_certificates.ts.
import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import { log } from "../lib/log.ts";
import { bridge, type ConnInfo, errorText, type ServeTlsOptions } from "./tls_bridge.ts";
import { peerSubject } from "./tls_certificates.ts";

export type { ConnInfo, ServeTlsOptions } from "./tls_bridge.ts";

export interface TlsListener {
  port: number;
  /** stops accepting, lets in-flight requests finish (bounded), then drops every connection */
  close(): Promise<void>;
}

/** How long close() waits for in-flight requests before cutting their connections. */
const CLOSE_GRACE_MS = 5_000;

export async function serveTls(opts: ServeTlsOptions): Promise<TlsListener> {
  const { tls } = opts;
  const wantCerts = tls.clientAuth !== "none";
  if (wantCerts && !tls.clientCaBundle) {
    throw new Error(`client_auth = "${tls.clientAuth}" needs a client CA bundle`);
  }
  const [key, cert, ca] = await Promise.all([
    Deno.readTextFile(tls.serverPrivateKey),
    Deno.readTextFile(tls.serverCertificateBundle),
    wantCerts ? Deno.readTextFile(tls.clientCaBundle!) : Promise.resolve(undefined),
  ]);
  const connInfo = new WeakMap<TLSSocket, ConnInfo>();
  const server: Server = createServer({
    key,
    cert,
    ...(wantCerts
      ? { requestCert: true, ca, rejectUnauthorized: tls.clientAuth === "required" }
      : {}),
    // Uploads of many GiB outlive node's default 5-minute whole-request timeout.
    requestTimeout: 0,
  }, (req, res) => {
    const socket = req.socket as TLSSocket;
    // Belt and braces: "required" must never serve a connection whose certificate failed.
    if (tls.clientAuth === "required" && !socket.authorized) {
      socket.destroy();
      return;
    }
    let conn = connInfo.get(socket);
    if (!conn) {
      conn = {
        remoteAddr: remoteAddr(socket),
        certificate: wantCerts ? peerSubject(socket) : null,
      };
      connInfo.set(socket, conn);
    }
    bridge(req, res, conn, opts).catch((e) => {
      log.error("tls listener: request failed", { error: errorText(e) });
      res.destroy();
    });
  });
  // A failed handshake (no or untrusted certificate under "required", plain HTTP, scanners)
  // concerns that connection only.
  server.on("tlsClientError", (_e: Error, s: TLSSocket) => s.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => log.error("tls listener error", { error: errorText(e) }));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  opts.onListen?.({ hostname: opts.hostname, port });

  let closing: Promise<void> | null = null;
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}

function remoteAddr(socket: TLSSocket): string {
  const a = socket.remoteAddress ?? "";
  return a.startsWith("::ffff:") ? a.slice(7) : a;
}
