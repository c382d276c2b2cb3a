// Loading and error states shared by the views (SPEC UI behaviour 11: spinner, 404 message, 401
// starts sign-in or says so when already signed in, 403 message, 500 message with retry).
import { useEffect } from "preact/hooks";
import { ApiError } from "./api.ts";
import { currentToken, signIn } from "./auth.ts";
import { uiConfig } from "./config.ts";

export function Loading({ text = "Loading…" }: { text?: string }) {
  return (
    <p class="loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true"></span>
      {text}
    </p>
  );
}

export function ErrorState(
  { error, retry }: { error: unknown; retry?: () => void },
) {
  const status = error instanceof ApiError ? error.status : 0;
  const signingIn = status === 401 && !!uiConfig.oidc && !currentToken();
  useEffect(() => {
    if (signingIn) signIn(uiConfig.oidc!).catch((e) => alert(String(e)));
  }, [signingIn]);
  if (signingIn) return <Loading text="Signing in…" />;
  const text = status === 404
    ? "Not found: it does not exist or you may not see it."
    : status === 401
    ? (currentToken()
      ? "Your sign-in is not accepted here (401): it may have expired. Sign out and sign in again."
      : "Sign-in is required to see this, and this registry's web UI has no sign-in configured.")
    : status === 403
    ? "You are not allowed to see this (403)."
    : `Something went wrong${error instanceof Error ? `: ${error.message}` : ""}.`;
  return (
    <div class="error" role="alert" data-status={status}>
      <p>{text}</p>
      {error instanceof ApiError && error.detail && (
        <p class="muted" data-detail>The registry said: {error.detail}</p>
      )}
      {(status >= 500 || status === 0) && retry
        ? <button type="button" onClick={retry}>Retry</button>
        : null}
    </div>
  );
}
