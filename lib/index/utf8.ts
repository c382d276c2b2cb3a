// How long a name from a layer is once encoded: the bound budgets and KV keys are measured in.

/** UTF-8 bytes of `s` (a lone surrogate as U+FFFD), counted no further than past `stop`. */
export function utf8Length(s: string, stop = Infinity): number {
  let n = 0;
  for (let i = 0; i < s.length && n <= stop; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (
      c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 &&
      s.charCodeAt(i + 1) <= 0xdfff
    ) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
