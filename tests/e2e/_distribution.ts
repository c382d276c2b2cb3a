// Debian's docker-registry (CNCF distribution 2.8) as a real peer: a pull-through upstream
// (optionally behind htpasswd Basic auth) or itself a proxy of another registry. Each instance
// lives in a temp directory on a free loopback port.
import { join } from "node:path";
import bcrypt from "bcryptjs";
import { type Daemon, missingReason, runs, startDaemon } from "./_tools.ts";

export function distributionMissing(): string | null {
  const missing = runs("docker-registry", ["--version"]) ? [] : ["docker-registry"];
  return missingReason("docker-registry", missing, "apt-get install docker-registry");
}

export interface DistributionOptions {
  /** htpasswd Basic auth with this one user */
  htpasswd?: { username: string; password: string };
  /** run as a pull-through proxy of this registry */
  proxy?: { remoteurl: string; username?: string; password?: string };
  /** reuse a data directory (restart on the same content) */
  dataDir?: string;
  port?: number;
  /** `storage.delete.enabled` (default true): false answers every manifest DELETE 405 */
  deleteEnabled?: boolean;
  /** run inside this network namespace (`ip netns exec`), listening on `address` */
  netns?: string;
  /** the address it listens on (default 127.0.0.1; with `netns`, give `port` too) */
  address?: string;
}

export interface Distribution {
  url: string;
  /** host:port, as skopeo and containerd name it */
  host: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
  log(): string;
}

export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

export async function startDistribution(opts: DistributionOptions = {}): Promise<Distribution> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-distribution-" });
  const dataDir = opts.dataDir ?? join(dir, "data");
  const port = opts.port ?? freePort();
  const address = opts.address ?? "127.0.0.1";
  let auth = "";
  if (opts.htpasswd) {
    const hash = bcrypt.hashSync(opts.htpasswd.password, 6);
    await Deno.writeTextFile(join(dir, "htpasswd"), `${opts.htpasswd.username}:${hash}\n`);
    auth = `auth:
  htpasswd:
    realm: wharf-test
    path: ${join(dir, "htpasswd")}
`;
  }
  let proxy = "";
  if (opts.proxy) {
    proxy = `proxy:
  remoteurl: ${opts.proxy.remoteurl}
${
      opts.proxy.username
        ? `  username: ${opts.proxy.username}\n  password: ${opts.proxy.password}\n`
        : ""
    }`;
  }
  await Deno.writeTextFile(
    join(dir, "config.yml"),
    `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  cache:
    blobdescriptor: inmemory
  filesystem:
    rootdirectory: ${dataDir}
  delete:
    enabled: ${opts.deleteEnabled ?? true}
http:
  addr: ${address}:${port}
${auth}${proxy}`,
  );
  const url = `http://${address}:${port}`;
  const ready = async () => {
    try {
      const r = await fetch(`${url}/v2/`, { signal: AbortSignal.timeout(1000) });
      await r.body?.cancel();
      return r.status === 200 || r.status === 401;
    } catch {
      return false;
    }
  };
  let daemon: Daemon;
  try {
    const serve = ["docker-registry", "serve", join(dir, "config.yml")];
    daemon = opts.netns
      ? await startDaemon("ip", ["netns", "exec", opts.netns, ...serve], ready)
      : await startDaemon(serve[0], serve.slice(1), ready);
  } catch (e) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    throw e;
  }
  return {
    url,
    host: `${address}:${port}`,
    port,
    dataDir,
    log: () => daemon.log(),
    stop: async () => {
      await daemon.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
