// A secret kind as the API names it, with what it matches in plain words beside it.
import { SECRET_KINDS } from "./secret_kinds.ts";

const BY_KIND = new Map(SECRET_KINDS.map((k) => [k.kind, k]));

/** `kind` in plain words, or "" for a kind this UI does not know. */
export function describeSecretKind(kind: string): string {
  const k = BY_KIND.get(kind);
  return k ? `${k.name} — ${k.matches}` : "";
}

export function SecretKind({ kind }: { kind: string }) {
  const what = describeSecretKind(kind);
  return (
    <span class="secret-kind" data-kind={kind}>
      <code>{kind}</code>
      {what && <span class="secret-what">{what}</span>}
    </span>
  );
}
