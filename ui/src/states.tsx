// Loading and error states shared by the views (SPEC UI behaviour: spinner, 404, 401, 403, 500
// with retry).
import { ApiError } from "./api.ts";

export function Loading() {
  return <p class="loading" role="status" aria-live="polite">Loading…</p>;
}

export function ErrorState({ error, retry }: { error: unknown; retry: () => void }) {
  const status = error instanceof ApiError ? error.status : 0;
  const text = status === 404
    ? "Not found."
    : status === 401
    ? "Sign-in is required to see this."
    : status === 403
    ? "You are not allowed to see this."
    : `Something went wrong${error instanceof Error ? `: ${error.message}` : ""}.`;
  return (
    <div class="error" role="alert">
      <p>{text}</p>
      {status >= 500 || status === 0 ? <button type="button" onClick={retry}>Retry</button> : null}
    </div>
  );
}
