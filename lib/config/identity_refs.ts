// How the config names one identity in a list (`[global.rate_limit] exempt_identities`):
// `provider:name`, with the provider as `identity.provider` spells it (docs/auth.md). A name alone
// is the same user under another sign-in method (an OIDC `preferred_username`, a certificate's
// CN), so an entry always says which method it trusts: `basic:ci`, `oidc:corp:ci`, `mtls:ci`.
// A bare `ci` is kept for configs written before providers, and only where it cannot be read two
// ways: it must be a configured Basic username, and means that Basic user only.

/** What a list entry is checked against: the configured Basic usernames and OIDC providers. */
export interface KnownIdentities {
  basicUsernames: ReadonlySet<string>;
  oidcProviders: ReadonlySet<string>;
}

/**
 * The canonical `provider:name` of an entry, or a sentence saying why it is refused. Canonical
 * forms are what identityRefOf gives an identity, so matching is string equality.
 */
export function parseIdentityRef(entry: string, known: KnownIdentities): string | {
  error: string;
} {
  const colon = entry.indexOf(":");
  if (colon < 0) {
    if (entry === "") return { error: "is empty" };
    if (known.basicUsernames.has(entry)) return `basic:${entry}`;
    return {
      error: `"${entry}" names no [auth.identity] username; say which sign-in method it is: ` +
        `"basic:${entry}", "oidc:<provider>:${entry}" or "mtls:${entry}"`,
    };
  }
  const provider = entry.slice(0, colon);
  const rest = entry.slice(colon + 1);
  if (provider === "basic" || provider === "mtls") {
    return rest === "" ? { error: `"${entry}" has no name after "${provider}:"` } : entry;
  }
  if (provider === "oidc") {
    const c = rest.indexOf(":");
    const name = c < 0 ? "" : rest.slice(0, c);
    if (c < 0 || rest.slice(c + 1) === "") {
      return { error: `"${entry}" must be "oidc:<provider>:<username>"` };
    }
    if (!known.oidcProviders.has(name)) {
      return { error: `"${entry}": "${name}" is not a configured [auth.oidc.<name>] provider` };
    }
    return entry;
  }
  return {
    error: `"${entry}": unknown sign-in method "${provider}" (basic, oidc:<provider> or mtls)`,
  };
}

/**
 * The `provider:name` an identity is listed as, or null when it has no name to list (anonymous,
 * a certificate without a CN).
 */
export function identityRefOf(
  identity: { provider?: string; username?: string },
): string | null {
  const { provider, username } = identity;
  if (provider === undefined || username === undefined || provider === "anonymous") return null;
  return `${provider}:${username}`;
}
