// `WWW-Authenticate` as RFC 7235 §4.1 writes it: one or more challenges, each a scheme with a
// token68 or comma-separated auth-params. Upstreams are not trusted to be tidy, so the parser
// is a hand-written scanner that fails with ChallengeSyntaxError (never a stray TypeError).

export interface Challenge {
  /** lower-cased: schemes compare case-insensitively */
  scheme: string;
  /** lower-cased names; quoted values unescaped */
  params: Record<string, string>;
  token68?: string;
}

export class ChallengeSyntaxError extends Error {
  override readonly name = "ChallengeSyntaxError";
}

const TCHAR = /[!#$%&'*+.^_`|~0-9A-Za-z-]/;
const TOKEN68 = /^[A-Za-z0-9._~+/-]+=*(?=[ \t]*(?:,|$))/;

class Scanner {
  i = 0;
  constructor(readonly s: string) {}
  get end(): boolean {
    return this.i >= this.s.length;
  }
  /** the current character (a method: TypeScript would narrow a property across calls) */
  c(): string {
    return this.s[this.i];
  }
  fail(what: string): never {
    throw new ChallengeSyntaxError(`malformed WWW-Authenticate: ${what} at offset ${this.i}`);
  }
  ows(): number {
    const start = this.i;
    while (!this.end && (this.c() === " " || this.c() === "\t")) this.i++;
    return this.i - start;
  }
  /** OWS and empty list elements (RFC 7230 §7: `a, , b` is a list of two). */
  separators(): void {
    while (!this.end && (this.c() === " " || this.c() === "\t" || this.c() === ",")) this.i++;
  }
  token(): string {
    const start = this.i;
    while (!this.end && TCHAR.test(this.c())) this.i++;
    return this.s.slice(start, this.i);
  }
  /**
   * Finds the closing quote first, then unescapes in one native pass: built a character or an
   * escape at a time, a 1 MB realm cost ~100 × a 64 KB one.
   */
  quoted(): string {
    const start = ++this.i; // past the opening quote
    while (!this.end && this.c() !== '"') this.i += this.c() === "\\" ? 2 : 1;
    if (this.end) {
      this.i = this.s.length;
      return this.fail("unterminated quoted string");
    }
    const raw = this.s.slice(start, this.i++);
    return raw.includes("\\") ? raw.replace(/\\([\s\S])/g, "$1") : raw;
  }
  /** Does an auth-param (`token BWS "="`) start here, rather than the next challenge? */
  atParam(): boolean {
    const m = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*=/.exec(this.s.slice(this.i));
    return m !== null && !TOKEN68.test(this.s.slice(this.i));
  }
}

/** Parses a `WWW-Authenticate` value into its challenges, in order. */
export function parseChallenges(header: string): Challenge[] {
  const p = new Scanner(header);
  const out: Challenge[] = [];
  p.separators();
  if (p.end) p.fail("no challenge");
  while (!p.end) {
    const scheme = p.token();
    if (scheme === "") p.fail(`expected an auth scheme, found ${JSON.stringify(p.c())}`);
    const ch: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    out.push(ch);
    const spaced = p.ows() > 0;
    if (p.end) break;
    if (p.c() === ",") {
      p.separators();
      if (p.end) break;
      if (!p.atParam()) continue; // `Basic, Bearer …`: the next challenge
    } else if (!spaced) {
      p.fail(`unexpected ${JSON.stringify(p.c())} after the scheme`);
    } else {
      const t68 = TOKEN68.exec(header.slice(p.i));
      if (t68) {
        ch.token68 = t68[0];
        p.i += t68[0].length;
        p.ows();
        p.separators();
        continue;
      }
    }
    params(p, ch);
  }
  return out;
}

/** auth-params of `ch` up to the end or to the next challenge. */
function params(p: Scanner, ch: Challenge): void {
  while (true) {
    const name = p.token().toLowerCase();
    if (name === "") p.fail("expected a parameter name");
    p.ows();
    if (p.c() !== "=") p.fail(`expected "=" after ${name}`);
    p.i++;
    p.ows();
    let value: string;
    if (p.c() === '"') {
      value = p.quoted();
    } else {
      value = p.token();
      if (value === "") p.fail(`expected a value for ${name}`);
    }
    if (Object.hasOwn(ch.params, name)) p.fail(`duplicate parameter ${name}`);
    // defineProperty, so a parameter named __proto__ is a parameter like any other
    Object.defineProperty(ch.params, name, { value, enumerable: true, writable: true });
    p.ows();
    if (p.end) return;
    if (p.c() !== ",") p.fail(`unexpected ${JSON.stringify(p.c())} after ${name}`);
    p.separators();
    if (p.end || !p.atParam()) return;
  }
}
