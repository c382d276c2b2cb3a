// TEMPORARY STUB (being replaced by the real parser)
export function isElf(head: Uint8Array): boolean {
  return head[0] === 0x7f && head[1] === 0x45 && head[2] === 0x4c && head[3] === 0x46;
}
export function readElf(
  _readAt: (offset: number, length: number) => Promise<Uint8Array>,
  _size: number,
): Promise<Record<string, unknown> | null> {
  return Promise.resolve(null);
}
