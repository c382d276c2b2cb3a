// `[server]` (the listen address, trusted proxies, TLS) and `[ui]` (the web UI and its sign-in).
import type { Config, TlsConfig } from "./schema.ts";
import { isIpOrCidr, type Reader } from "./config_reader.ts";
import type { Table } from "./table_readers.ts";

/** `[server]`: where to listen, whose X-Forwarded-For to trust, and `[server.tls]`. */
export function readServer(r: Reader, server: Table, cfg: Config): void {
  r.only(server, "server", ["bind_address", "port", "tls", "trusted_proxies"]);
  cfg.server.bindAddress = r.str(server, "bind_address", "server") ?? cfg.server.bindAddress;
  cfg.server.port = r.int(server, "port", "server", 0, 65535) ?? cfg.server.port;
  cfg.server.trustedProxies = r.strings(server, "trusted_proxies", "server") ?? [];
  for (const [i, p] of cfg.server.trustedProxies.entries()) {
    if (!isIpOrCidr(p)) {
      r.fail(`server.trusted_proxies[${i}]`, `"${p}" is not an IP address or CIDR`);
    }
  }
  if (server.tls !== undefined) cfg.server.tls = readTls(r, r.table(server.tls, "server.tls"));
}

function readTls(r: Reader, t: Table): TlsConfig {
  const path = "server.tls";
  r.only(t, path, [
    "server_certificate_bundle",
    "server_private_key",
    "client_ca_bundle",
    "client_auth",
  ]);
  const cert = r.str(t, "server_certificate_bundle", path);
  const key = r.str(t, "server_private_key", path);
  if (!cert) r.fail(`${path}.server_certificate_bundle`, "is required with [server.tls]");
  if (!key) r.fail(`${path}.server_private_key`, "is required with [server.tls]");
  const ca = r.str(t, "client_ca_bundle", path) ?? null;
  const mode = r.str(t, "client_auth", path) ?? (ca ? "optional" : "none");
  if (mode !== "none" && mode !== "optional" && mode !== "required") {
    r.fail(`${path}.client_auth`, `must be "optional" or "required"`);
  }
  if (mode !== "none" && !ca) {
    r.fail(`${path}.client_ca_bundle`, `is required with client_auth = "${mode}"`);
  }
  return {
    serverCertificateBundle: cert,
    serverPrivateKey: key,
    clientCaBundle: ca,
    clientAuth: mode,
  };
}

export function readUi(r: Reader, ui: Table, cfg: Config): void {
  r.only(ui, "ui", ["enabled", "name", "oidc"]);
  cfg.ui.enabled = r.bool(ui, "enabled", "ui") ?? false;
  cfg.ui.name = r.str(ui, "name", "ui") ?? cfg.ui.name;
  if (ui.oidc === undefined) return;
  const o = r.table(ui.oidc, "ui.oidc");
  r.only(o, "ui.oidc", ["provider", "client_id", "scopes"]);
  const provider = r.str(o, "provider", "ui.oidc");
  const clientId = r.str(o, "client_id", "ui.oidc");
  if (!provider) r.fail("ui.oidc.provider", "is required");
  if (!clientId) r.fail("ui.oidc.client_id", "is required");
  if (!cfg.auth.oidc.has(provider!)) {
    r.fail("ui.oidc.provider", `"${provider}" is not a configured [auth.oidc.<name>] provider`);
  }
  cfg.ui.oidc = {
    provider: provider!,
    clientId: clientId!,
    scopes: r.str(o, "scopes", "ui.oidc") ?? "openid profile email",
  };
}
