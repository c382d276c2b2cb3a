// UI sign-in (`[ui.oidc]`): OAuth 2.0 authorization code flow with PKCE (S256) for a public client.
// The ID token lands in session storage and goes to the API as `Authorization: Bearer`.
import { setTokenSource, type UiConfig } from "./api.ts";
import { CALLBACK_PATH } from "./route.ts";

const TOKEN = "wharf.token";
const PENDING = "wharf.signin";

interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
  tokenEndpoint: string;
}

function b64url(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomString(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

function session(): Storage | null {
  // reading the property throws where storage is disabled
  let s: Storage | null = null;
  try {
    s = globalThis.sessionStorage;
  } catch {
    s = null;
  }
  return s;
}

export function currentToken(): string | null {
  const t = session()?.getItem(TOKEN) ?? null;
  if (!t) return null;
  const exp = claims(t)?.exp;
  if (typeof exp === "number" && exp * 1000 < Date.now()) {
    session()?.removeItem(TOKEN);
    return null;
  }
  return t;
}

export function claims(token: string): Record<string, unknown> | null {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - part.length % 4) % 4)));
  } catch {
    return null;
  }
}

setTokenSource(currentToken);

async function discover(issuer: string): Promise<Record<string, string>> {
  const r = await fetch(
    `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`,
    {
      credentials: "omit",
    },
  );
  if (!r.ok) {
    throw new Error(`the identity provider's discovery answered ${r.status}`);
  }
  return await r.json();
}

/** Leaves for the provider's authorization endpoint; comes back to CALLBACK_PATH. */
export async function signIn(oidc: NonNullable<UiConfig["oidc"]>) {
  const meta = await discover(oidc.issuer);
  if (!meta.authorization_endpoint || !meta.token_endpoint) {
    throw new Error(
      "the identity provider publishes no authorization or token endpoint",
    );
  }
  const verifier = randomString();
  const challenge = b64url(
    new Uint8Array(
      await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)),
    ),
  );
  const pending: Pending = {
    state: randomString(),
    nonce: randomString(),
    verifier,
    returnTo: location.pathname + location.search + location.hash,
    tokenEndpoint: meta.token_endpoint,
  };
  session()?.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(meta.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: oidc.client_id,
    redirect_uri: location.origin + CALLBACK_PATH,
    scope: oidc.scopes,
    state: pending.state,
    nonce: pending.nonce,
    code_challenge: challenge,
    code_challenge_method: "S256",
  }).toString();
  location.assign(url.toString());
}

/**
 * Finishes a sign-in on CALLBACK_PATH: the state must be the one this tab sent, the code is
 * exchanged with the PKCE verifier, and the ID token's nonce must match. Returns where to go next.
 */
export async function completeSignIn(
  oidc: NonNullable<UiConfig["oidc"]>,
): Promise<string> {
  const params = new URLSearchParams(location.search);
  const raw = session()?.getItem(PENDING);
  session()?.removeItem(PENDING);
  if (params.get("error")) {
    throw new Error(
      `sign-in failed: ${params.get("error_description") ?? params.get("error")}`,
    );
  }
  if (!raw) {
    throw new Error("sign-in failed: no sign-in was started in this tab");
  }
  const pending = JSON.parse(raw) as Pending;
  if (!params.get("state") || params.get("state") !== pending.state) {
    throw new Error(
      "sign-in failed: the answer's state does not match the request",
    );
  }
  const code = params.get("code");
  if (!code) throw new Error("sign-in failed: no authorization code");
  const r = await fetch(pending.tokenEndpoint, {
    method: "POST",
    credentials: "omit",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: location.origin + CALLBACK_PATH,
      client_id: oidc.client_id,
      code_verifier: pending.verifier,
    }),
  });
  if (!r.ok) {
    throw new Error(`sign-in failed: the token endpoint answered ${r.status}`);
  }
  const body = await r.json();
  const token = body.id_token;
  if (typeof token !== "string") {
    throw new Error("sign-in failed: no ID token in the answer");
  }
  if (claims(token)?.nonce !== pending.nonce) {
    throw new Error(
      "sign-in failed: the ID token's nonce does not match the request",
    );
  }
  session()?.setItem(TOKEN, token);
  return pending.returnTo || "/";
}

export function signOut() {
  session()?.removeItem(TOKEN);
}

/** The signed-in user's display name from the token, or null when signed out. */
export function signedInAs(): string | null {
  const t = currentToken();
  if (!t) return null;
  const c = claims(t) ?? {};
  return String(
    c.preferred_username ?? c.email ?? c.name ?? c.sub ?? "signed in",
  );
}
