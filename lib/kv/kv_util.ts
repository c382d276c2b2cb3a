// Small Deno KV read helpers shared by the modules that keep records.

/** `kv.getMany` takes at most 10 keys; this takes any number, keeping order. */
export async function getAll<T>(kv: Deno.Kv, keys: Deno.KvKey[]): Promise<Deno.KvEntryMaybe<T>[]> {
  const out: Deno.KvEntryMaybe<T>[] = [];
  for (let i = 0; i < keys.length; i += 10) {
    out.push(...await kv.getMany<T[]>(keys.slice(i, i + 10)));
  }
  return out;
}

/** Collects every key/value under a prefix (bounded by `limit`). */
export async function listAll<T>(
  kv: Deno.Kv,
  selector: Deno.KvListSelector,
  limit?: number,
): Promise<Deno.KvEntry<T>[]> {
  const out: Deno.KvEntry<T>[] = [];
  for await (
    const e of kv.list<T>(selector, { limit, batchSize: limit ? Math.min(limit, 500) : 500 })
  ) out.push(e);
  return out;
}

export async function hasAny(kv: Deno.Kv, prefix: Deno.KvKey): Promise<boolean> {
  for await (const _ of kv.list({ prefix }, { limit: 1 })) return true;
  return false;
}
