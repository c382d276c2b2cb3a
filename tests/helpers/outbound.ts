// Fixtures for the outbound guard's tests (issue 22 §4), all on 127.0.0.1: a redirector that
// answers with a chosen Location, and a sink that counts what reaches it. A sink is also
// reachable as http://0.0.0.0:<port>/ (Linux connects 0.0.0.0 to the local host), which the
// guard refuses: a refused target that would have been reachable, so "never contacted" is
// asserted by a count of zero rather than assumed.

/** Targets no answer may send Wharf to; nothing listens there and nothing is sent. */
export const METADATA_TARGETS = [
  "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
  "http://[fd00:ec2::254]/latest/meta-data/",
  "http://2852039166/latest/meta-data/", // 169.254.169.254 in decimal
  "http://0xa9.0xfe.0xa9.0xfe/computeMetadata/v1/",
  "http://[::ffff:169.254.169.254]/metadata/instance",
  "http://169.254.10.1:8080/",
  "http://[fe80::1]/",
];

export interface LocalServer extends AsyncDisposable {
  port: number;
  url: string;
  /** requests received, with their Host header */
  seen: { method: string; path: string; host: string | null }[];
  close(): Promise<void>;
}

function serve(handler: (req: Request) => Response): LocalServer {
  const seen: LocalServer["seen"] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const u = new URL(req.url);
    seen.push({ method: req.method, path: u.pathname + u.search, host: req.headers.get("host") });
    return handler(req);
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await server.shutdown();
  };
  return {
    port: server.addr.port,
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Counts requests and answers 200 `{}`. */
export function startSink(): LocalServer & { unspecifiedUrl: string } {
  const s = serve(() => Response.json({}));
  return { ...s, unspecifiedUrl: `http://0.0.0.0:${s.port}` };
}

/** Answers every request `status` with `Location: to` (a function of the request, or fixed). */
export function startRedirector(
  to: string | ((req: Request) => string),
  status = 307,
): LocalServer & { to: string | ((req: Request) => string) } {
  const holder = { to };
  const s = serve((req) => {
    const t = holder.to;
    return new Response(null, {
      status,
      headers: { location: typeof t === "string" ? t : t(req) },
    });
  });
  return Object.defineProperty({ ...s } as LocalServer & { to: typeof to }, "to", {
    get: () => holder.to,
    set: (v: typeof to) => holder.to = v,
  });
}
