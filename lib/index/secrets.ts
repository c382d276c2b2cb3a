// The secret scan of a text file (SPEC §Layer listing, Secret kinds; §Limits: a line is read up
// to its first 64 KiB). The rules read each row of the SPEC table the way gitleaks/trufflehog
// rules do: a fixed prefix or key name, a value shaped like the real credential, and (for
// random tokens) letters mixed with digits so that `xxxx…`, `ABCD…` and `000…` placeholders
// are not reported. A value containing `EXAMPLE` never counts (SPEC).
//
// File-name bindings (a path's last segments):
//   registry-auth       `.docker/config.json` (config.json alone is too common a name to
//                       trust), `.dockercfg` (its legacy form) and `auth.json` in any directory
//                       (podman/skopeo/buildah take it from anywhere via REGISTRY_AUTH_FILE;
//                       the value must also decode to `user:password`, which keeps unrelated
//                       auth.json files out)
//   cluster-config      `token:` only in `*.kubeconfig`, `kubeconfig` or `.kube/config`;
//                       `client-key-data:` in any file
//   npm-token           `.npmrc` and `npmrc` (the global/builtin rc files have no dot)
//   git-credentials     `.git-credentials` and `git/credentials` (git's XDG location)
//   netrc               `.netrc` and `_netrc` (its Windows name)
//
// Lines end at LF; a CR before it is dropped, so CRLF files number lines like LF files.
//
// Pushed files are hostile: the scan is linear in the bytes it reads (no pattern backtracks more
// than once over a line), reads at most maxBytes of a file, and stops at maxFindings findings
// (`truncated` then says which limit stopped it; the listing's `secrets` array has no room for a
// marker).

export interface SecretFinding {
  kind: string;
  /** 1-based */
  line: number;
}

/** SPEC §Limits: a line is read up to its first 64 KiB. */
export const SECRET_LINE_BYTES = 64 * 1024;
const LINE_MAX = SECRET_LINE_BYTES;
/** Findings listed per file: past a few, a file is a dump of tokens, and listing more says nothing. */
export const MAX_SECRET_FINDINGS = 100;
/** Bytes of one file scanned; the rest of a larger file is not. */
export const MAX_SECRET_SCAN_BYTES = 16 << 20;

export interface SecretScanOptions {
  /** findings kept per file; the scan stops at the next one */
  maxFindings?: number;
  /** bytes of the file scanned */
  maxBytes?: number;
}
/** SPEC's kinds, in its order (secret_kinds.ts says what each matches). */
export const KINDS = [
  "private-key",
  "cloudA-credentials",
  "cloudA-access-key",
  "hostA-token",
  "hostB-token",
  "chat-token",
  "payment-key",
  "registry-auth",
  "cluster-config",
  "npm-token",
  "git-credentials",
  "netrc",
] as const;
type Kind = typeof KINDS[number];
const KIND_ORDER = new Map<string, number>(KINDS.map((k, i) => [k, i]));

// latin1: one char per byte, so the 64 KiB cut counts bytes, and a UTF-8 sequence can never
// look like the ASCII the rules match
const latin1 = new TextDecoder("latin1");

interface Binding {
  registry: boolean;
  kube: boolean;
  npm: boolean;
  git: boolean;
  netrc: boolean;
}

function binding(path: string): Binding {
  const parts = path.split("/");
  const base = parts[parts.length - 1] ?? "";
  const parent = parts[parts.length - 2] ?? "";
  return {
    registry: (base === "config.json" && parent === ".docker") || base === ".dockercfg" ||
      base === "auth.json",
    kube: base.endsWith(".kubeconfig") || base === "kubeconfig" ||
      (base === "config" && parent === ".kube"),
    npm: base === ".npmrc" || base === "npmrc",
    git: base === ".git-credentials" || (base === "credentials" && parent === "git"),
    netrc: base === ".netrc" || base === "_netrc",
  };
}

// Every rule below needs one of these on its line; most lines of most files have none, so
// the scan runs one regex over a whole chunk instead of twelve over every line.
const ANCHORS = [
  "PRIVATE KEY",
  "secret[_-]?access[_-]?key",
  "A[KS]IA",
  "gh[pousr]_",
  "github_pat_",
  "glpat-",
  "xox[bp]-",
  "[sr]k_live_",
  "client-key-data",
];
const anchorCache = new Map<string, RegExp>();
function anchorFor(b: Binding): RegExp {
  const extra = [
    b.registry ? '"auth"' : "",
    b.kube ? "token" : "",
    b.npm ? "_auth|_password" : "",
    b.git ? "://" : "",
    b.netrc ? "password" : "",
  ].filter(Boolean);
  const key = extra.join("|");
  let re = anchorCache.get(key);
  if (!re) {
    re = new RegExp([...ANCHORS, ...extra].join("|"), "gi");
    anchorCache.set(key, re);
  }
  return new RegExp(re.source, re.flags);
}

const mixed = (s: string) => /[A-Za-z]/.test(s) && /[0-9]/.test(s);
const real = (s: string) => !s.includes("EXAMPLE");

/** Some match of `re` (global) whose group 1 is a mixed, non-example token. */
function anyToken(re: RegExp, line: string): boolean {
  // exec over the shared regex: matchAll would clone it for every line
  re.lastIndex = 0;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    if (mixed(m[1]) && real(m[0])) return true;
  }
  return false;
}

const KEY_LABEL = "(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?";
const KEY_BEGIN = new RegExp(`^[ \\t]*-----BEGIN ${KEY_LABEL}-----[ \\t]*$`);
const KEY_JSON = new RegExp(
  `"private_key"\\s*:\\s*"-----BEGIN ${KEY_LABEL}-----(?:\\\\r)?\\\\n([A-Za-z0-9+/]{16,}={0,2})`,
);
const KEY_MATERIAL = /^[A-Za-z0-9+/]{16,}={0,2}$/;
// RFC 1421 / RFC 4880 armor headers (`Proc-Type:`, `DEK-Info:`, `Version:`, `Comment:`) and
// the blank line after them may stand between BEGIN and the base64
const KEY_HEADER = /^[A-Za-z][A-Za-z0-9-]*:/;
const KEY_HEADER_LINES = 8;

const CLOUD_SECRET =
  /(?:^|[^A-Za-z0-9])(?:aws)?[_-]?secret[_-]?access[_-]?key["']?(?:\s*(?:[:=]|=>|:=)\s*|\s+)["']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])/gi;
const CLOUD_ACCESS = /(?<![A-Za-z0-9])A[KS]IA([A-Z0-9]{16})(?![A-Za-z0-9])/g;
const HOST_A = /(?<![A-Za-z0-9_])gh[pousr]_([A-Za-z0-9]{36,})(?![A-Za-z0-9_])/g;
const HOST_A_PAT = /(?<![A-Za-z0-9_])github_pat_([A-Za-z0-9_]{22,})(?![A-Za-z0-9_])/g;
const HOST_B = /(?<![A-Za-z0-9_])glpat-([A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])/g;
const CHAT = /(?<![A-Za-z0-9_-])xox[bp]-([A-Za-z0-9-]{20,})(?![A-Za-z0-9-])/g;
const PAYMENT = /(?<![A-Za-z0-9_])[sr]k_live_([A-Za-z0-9]{16,})(?![A-Za-z0-9_])/g;
const REGISTRY_AUTH = /"auth"\s*:\s*"([A-Za-z0-9+/]+={0,2})"/g;
const CLIENT_KEY_DATA =
  /(?:^|[\s"'{,])client-key-data["']?\s*:\s*["']?([A-Za-z0-9+/]{16,}={0,2})(?![A-Za-z0-9+/=])/;
const KUBE_TOKEN = /(?:^|[\s"'{,])token["']?\s*:\s*["']?([A-Za-z0-9._~+/=-]{8,})(?![^\s"',}])/;
// The value is trimmed in code: `(.*?)\s*$` retries `\s*` at every character of the value,
// quadratic in a line of spaces.
const NPM_AUTH = /^\s*(?:[^\s=#;]*:)?_auth(?:Token)?\s*=(.*)$/;
const NPM_PASSWORD = /^\s*[^\s=#;]*:_password\s*=(.*)$/;
const GIT_URL = /^\s*[A-Za-z][A-Za-z0-9+.-]*:\/\/([^\s:@/]+):([^\s@/]+)@[^\s/@]+/;
const NETRC_PASSWORD = /(?:^|\s)password\s+(\S+)/;
const SECRET_WORD = /secret/i;

function registryAuth(line: string): boolean {
  for (const m of line.matchAll(REGISTRY_AUTH)) {
    let decoded: string;
    try {
      decoded = atob(m[1]);
    } catch {
      continue;
    }
    if (/^[^:]+:[^]+$/.test(decoded) && real(m[1]) && real(decoded)) return true;
  }
  return false;
}

function npmValue(v: string): boolean {
  const unquoted = v.replace(/^(["'])(.*)\1$/, "$2");
  // npm expands `${VAR}`: such a line names where the token is, not the token
  return unquoted !== "" && !/^\$\{[^}]*\}$/.test(unquoted) && real(unquoted);
}

/**
 * Incremental scan: bytes in any chunking, findings in line order, memory bounded by one
 * 64 KiB line buffer plus the chunk being scanned.
 */
export class SecretScanner {
  private readonly bound: Binding;
  private readonly anchor: RegExp;
  /** the line still being assembled across chunks (its first 64 KiB) */
  private readonly carry = new Uint8Array(LINE_MAX);
  private fill = 0;
  /** the line being assembled is past 64 KiB: the rest of it is dropped */
  private overflow = false;
  /** number of the next line to be completed */
  private line = 1;
  /** a private-key BEGIN line waiting for its base64 */
  private key: { line: number; left: number } | null = null;
  private readonly found: SecretFinding[] = [];
  private readonly seen = new Set<string>();
  private readonly maxFindings: number;
  /** bytes of the file still to be scanned */
  private left: number;
  /** a limit was reached: nothing more is scanned */
  private stopped = false;
  /**
   * Why the findings are incomplete, if they are: the file held more than maxFindings
   * ("findings"), or was longer than maxBytes ("bytes"; findings in its first maxBytes are kept).
   */
  truncated: "findings" | "bytes" | null = null;

  constructor(path: string, opts: SecretScanOptions = {}) {
    this.bound = binding(path);
    this.anchor = anchorFor(this.bound);
    this.maxFindings = opts.maxFindings ?? MAX_SECRET_FINDINGS;
    this.left = opts.maxBytes ?? MAX_SECRET_SCAN_BYTES;
  }

  push(chunk: Uint8Array): void {
    if (this.stopped || chunk.length === 0) return;
    let cut = false;
    if (chunk.length > this.left) {
      chunk = chunk.subarray(0, this.left);
      cut = true;
    }
    this.left -= chunk.length;
    this.scan(chunk);
    if (cut && !this.stopped) {
      this.truncated = "bytes";
      this.stopped = true;
    }
  }

  private scan(chunk: Uint8Array): void {
    const last = chunk.lastIndexOf(0x0a);
    if (last < 0) {
      this.append(chunk);
      return;
    }
    let start = 0;
    if (this.fill > 0 || this.overflow) {
      const nl = chunk.indexOf(0x0a);
      this.append(chunk.subarray(0, nl));
      this.lineDone(latin1.decode(this.carry.subarray(0, this.fill)));
      this.fill = 0;
      this.overflow = false;
      start = nl + 1;
      if (this.stopped) return;
    }
    if (start <= last) this.region(latin1.decode(chunk.subarray(start, last)));
    if (this.stopped) return;
    this.append(chunk.subarray(last + 1));
  }

  finish(): SecretFinding[] {
    // a file cut at maxBytes ends in the part line read so far, like any file without a last LF
    if ((this.fill > 0 || this.overflow) && this.truncated !== "findings") {
      this.lineDone(latin1.decode(this.carry.subarray(0, this.fill)));
      this.fill = 0;
      this.overflow = false;
    }
    this.key = null;
    // a private key is only known once the line after BEGIN is read, after that line's own
    // findings may be in
    return this.found.sort((a, b) =>
      a.line - b.line || KIND_ORDER.get(a.kind)! - KIND_ORDER.get(b.kind)!
    );
  }

  private append(bytes: Uint8Array): void {
    const n = Math.min(bytes.length, LINE_MAX - this.fill);
    this.carry.set(bytes.subarray(0, n), this.fill);
    this.fill += n;
    if (n < bytes.length) this.overflow = true;
  }

  /** Complete lines joined by LF (no trailing LF): only those an anchor hits are examined. */
  private region(s: string): void {
    let pos = 0;
    for (;;) {
      if (!this.key) {
        this.anchor.lastIndex = pos;
        const m = this.anchor.exec(s);
        if (!m) {
          // the lines from pos on: one per LF, plus the last (s holds no trailing LF)
          for (let i = s.indexOf("\n", pos); i >= 0; i = s.indexOf("\n", i + 1)) this.line++;
          this.line++;
          return;
        }
        for (let i = s.indexOf("\n", pos); i >= 0 && i < m.index; i = s.indexOf("\n", i + 1)) {
          this.line++;
          pos = i + 1;
        }
      }
      const nl = s.indexOf("\n", pos);
      const end = nl < 0 ? s.length : nl;
      this.lineDone(s.slice(pos, Math.min(end, pos + LINE_MAX)));
      if (nl < 0 || this.stopped) return;
      pos = nl + 1;
    }
  }

  private report(kind: Kind, line: number): void {
    const k = `${kind}\n${line}`;
    if (this.seen.has(k)) return;
    if (this.found.length >= this.maxFindings) {
      this.truncated = "findings";
      this.stopped = true;
      return;
    }
    this.seen.add(k);
    this.found.push({ kind, line });
  }

  private lineDone(raw: string): void {
    const n = this.line++;
    const t = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (this.key) this.keyMaterial(t);
    const b = this.bound;
    // each rule runs only on a line holding its literal: most anchored lines hold one literal,
    // and a file of them is then one regex per line, not twelve
    if (t.includes("PRIVATE KEY")) {
      if (KEY_BEGIN.test(t)) this.key = { line: n, left: KEY_HEADER_LINES };
      const json = KEY_JSON.exec(t);
      if (json && real(json[1])) this.report("private-key", n);
    }
    if (SECRET_WORD.test(t) && anyToken(CLOUD_SECRET, t)) this.report("cloudA-credentials", n);
    if ((t.includes("AKIA") || t.includes("ASIA")) && anyToken(CLOUD_ACCESS, t)) {
      this.report("cloudA-access-key", n);
    }
    if (
      (t.includes("gh") && anyToken(HOST_A, t)) ||
      (t.includes("github_pat_") && anyToken(HOST_A_PAT, t))
    ) this.report("hostA-token", n);
    if (t.includes("glpat-") && anyToken(HOST_B, t)) this.report("hostB-token", n);
    if (t.includes("xox") && anyToken(CHAT, t)) this.report("chat-token", n);
    if (t.includes("k_live_") && anyToken(PAYMENT, t)) this.report("payment-key", n);
    if (b.registry && registryAuth(t)) this.report("registry-auth", n);
    const ckd = t.includes("client-key-data") ? CLIENT_KEY_DATA.exec(t) : null;
    let cluster = ckd !== null && real(ckd[1]);
    if (!cluster && b.kube) {
      const tok = KUBE_TOKEN.exec(t);
      cluster = tok !== null && mixed(tok[1]) && real(tok[1]);
    }
    if (cluster) this.report("cluster-config", n);
    if (b.npm) {
      const m = NPM_AUTH.exec(t) ?? NPM_PASSWORD.exec(t);
      if (m && npmValue(m[1].trim())) this.report("npm-token", n);
    }
    if (b.git) {
      const m = GIT_URL.exec(t);
      if (m && real(m[0])) this.report("git-credentials", n);
    }
    if (b.netrc) {
      const m = NETRC_PASSWORD.exec(t);
      if (m && real(m[1])) this.report("netrc", n);
    }
  }

  private keyMaterial(t: string): void {
    const key = this.key!;
    const s = t.trim();
    if (KEY_MATERIAL.test(s)) {
      if (real(s)) this.report("private-key", key.line);
      this.key = null;
    } else if ((s === "" || KEY_HEADER.test(s)) && --key.left > 0) {
      return;
    } else {
      this.key = null;
    }
  }
}
