// `[auth]`: Basic identities, OIDC providers, the token service and the authorization webhooks,
// and the identities it configures, which later sections' identity lists are checked against.
import type { Config } from "./schema.ts";
import { readAuthWebhooks } from "./hooks.ts";
import type { KnownIdentities } from "./identity_refs.ts";
import { isUrl, type Reader } from "./config_reader.ts";
import type { Table } from "./table_readers.ts";

export function readAuth(r: Reader, auth: Table, cfg: Config): void {
  r.only(auth, "auth", ["identity", "oidc", "token_service", "webhook"]);
  cfg.auth.webhooks = readAuthWebhooks(auth.webhook, r.fail.bind(r));
  const usernames = new Set<string>();
  for (const [id, v] of Object.entries(r.table(auth.identity, "auth.identity"))) {
    const path = `auth.identity.${id}`;
    const t = r.table(v, path);
    r.only(t, path, ["username", "password"]);
    const username = r.str(t, "username", path);
    const password = r.str(t, "password", path);
    if (!username) r.fail(`${path}.username`, "is required");
    if (username.includes(":")) r.fail(`${path}.username`, "must not contain ':'");
    if (!password || !password.startsWith("$argon2id$")) {
      r.fail(
        `${path}.password`,
        "must be an argon2id hash (print one with `main.ts hash-password`)",
      );
    }
    if (usernames.has(username)) {
      r.fail(`${path}.username`, `"${username}" is used by another identity`);
    }
    usernames.add(username);
    cfg.auth.identities.push({ id, username, password });
  }
  for (const [name, v] of Object.entries(r.table(auth.oidc, "auth.oidc"))) {
    const path = `auth.oidc.${name}`;
    const t = r.table(v, path);
    r.only(t, path, ["issuer", "jwks_uri", "audience", "required_claims", "username_claim"]);
    // `oidc:<name>:<username>` in identity lists is read up to the second ':'.
    if (name.includes(":")) r.fail(path, `provider name "${name}" must not contain ':'`);
    const issuer = r.str(t, "issuer", path);
    if (!issuer || !isUrl(issuer)) r.fail(`${path}.issuer`, "must be an http(s) URL");
    const jwksUri = r.str(t, "jwks_uri", path) ?? null;
    if (jwksUri !== null && !isUrl(jwksUri)) r.fail(`${path}.jwks_uri`, "must be an http(s) URL");
    const claims: Record<string, string | string[]> = {};
    for (const [k, cv] of Object.entries(r.table(t.required_claims, `${path}.required_claims`))) {
      if (typeof cv === "string") claims[k] = cv;
      else if (Array.isArray(cv) && cv.every((x) => typeof x === "string")) {
        claims[k] = cv as string[];
      } else r.fail(`${path}.required_claims.${k}`, "must be a string or an array of strings");
    }
    if (usernames.has(name)) r.fail(path, `provider name "${name}" is also a Basic username`);
    cfg.auth.oidc.set(name, {
      name,
      issuer,
      jwksUri,
      audience: r.stringOrList(t, "audience", path) ?? [],
      requiredClaims: claims,
      usernameClaim: r.str(t, "username_claim", path) || "sub",
    });
  }
  if (auth.token_service !== undefined) {
    const path = "auth.token_service";
    const t = r.table(auth.token_service, path);
    r.only(t, path, ["secret_key", "realm", "service", "ttl_secs"]);
    const secretKey = r.str(t, "secret_key", path);
    if (!secretKey || new TextEncoder().encode(secretKey).byteLength < 32) {
      r.fail(`${path}.secret_key`, "must be at least 32 bytes");
    }
    // Unset, it is derived per request from Host (behind a load balancer, every replica and
    // hostname then names itself); `service` must then be set or defaults to "wharf".
    const realm = r.str(t, "realm", path) ?? null;
    if (realm !== null && !isUrl(realm)) {
      r.fail(`${path}.realm`, "must be an http(s) URL (where clients fetch tokens)");
    }
    cfg.auth.tokenService = {
      secretKey,
      realm,
      service: r.str(t, "service", path) ?? (realm ? new URL(realm).host : "wharf"),
      ttlSecs: r.int(t, "ttl_secs", path, 1, 86400) ?? 300,
    };
  }
}

/** The identities readAuth configured, for the identity lists read after it. */
export function knownIdentities(cfg: Config): KnownIdentities {
  return {
    basicUsernames: new Set(cfg.auth.identities.map((i) => i.username)),
    oidcProviders: new Set(cfg.auth.oidc.keys()),
  };
}
