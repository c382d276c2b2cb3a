// What each secret kind matches, in plain words (SPEC §Layer listing, "Secret kinds"). The kind
// names are SPEC's and stay literal in every API answer; a reader of the UI, the CSV or the docs
// sees this beside each. One table: the CSV reads it here, the UI keeps a copy that
// tests/api/secret_kinds_test.ts holds equal to it (the UI bundle cannot import lib/), and the
// same test holds docs/scanning.md's table to it.

export interface SecretKindInfo {
  kind: string;
  /** what it is, in a few plain words */
  name: string;
  /** what the scan matches, after SPEC's table */
  matches: string;
}

export const SECRET_KINDS: readonly SecretKindInfo[] = [
  {
    kind: "private-key",
    name: "private key",
    matches:
      "a PEM, OpenSSH or PGP private key block opening a line, or set as a JSON private_key, with base64 key material after the BEGIN line",
  },
  {
    kind: "cloudA-credentials",
    name: "cloud secret access key",
    matches: "a secret access key line set to a 40-character key",
  },
  {
    kind: "cloudA-access-key",
    name: "cloud access key id",
    matches: "a token starting AKIA or ASIA, mixing letters and digits",
  },
  {
    kind: "hostA-token",
    name: "code host access token",
    matches:
      "a token starting ghp_, gho_, ghu_, ghs_, ghr_ or <host>_pat_, mixing letters and digits",
  },
  {
    kind: "hostB-token",
    name: "code host personal access token",
    matches: "a token starting glpat-, mixing letters and digits",
  },
  {
    kind: "chat-token",
    name: "chat bot or user token",
    matches: "a token starting xoxb- or xoxp-, mixing letters and digits",
  },
  {
    kind: "payment-key",
    name: "payment API live key",
    matches: "a token starting sk_live_ or rk_live_, mixing letters and digits",
  },
  {
    kind: "registry-auth",
    name: "container registry login",
    matches:
      "the auth entry of a container client's credentials file (.docker/config.json, .dockercfg, auth.json)",
  },
  {
    kind: "cluster-config",
    name: "cluster client credentials",
    matches:
      "a client-key-data set to base64, or a token in a cluster client config file (*.kubeconfig, kubeconfig, .kube/config)",
  },
  {
    kind: "npm-token",
    name: "package registry token",
    matches: "an _auth, _authToken or :_password set to a value in an .npmrc (or npmrc) file",
  },
  {
    kind: "git-credentials",
    name: "git credentials",
    matches: "a URL with a user and a password in a .git-credentials (or git/credentials) file",
  },
  {
    kind: "netrc",
    name: "netrc password",
    matches: "a password in a .netrc (or _netrc) file",
  },
];

const BY_KIND = new Map(SECRET_KINDS.map((k) => [k.kind, k]));

/** `kind` in plain words ("cloud access key id — a token starting AKIA or ASIA, …"), or null. */
export function describeSecretKind(kind: string): string | null {
  const k = BY_KIND.get(kind);
  return k ? `${k.name} — ${k.matches}` : null;
}
