// The walk `reindex` and the scan walks take over every namespace (or one), with how many there
// are, so their progress has a total and a time left: the category index is counted first (one
// listing, ~3 ms per thousand names), then walked in the same order. A namespace emptied since
// its last write is walked too and yields no revision, so the count and the walk agree.
import type { SvcMeta } from "../metadata/mod.ts";

export interface WalkStep {
  ns: string;
  /** namespaces walked before this one */
  index: number;
  total: number;
}

export async function* catalogWalk(
  catalog: Pick<SvcMeta, "indexed">,
  only?: string,
): AsyncGenerator<WalkStep> {
  if (only !== undefined) {
    yield { ns: only, index: 0, total: 1 };
    return;
  }
  let total = 0;
  for await (const _ of catalog.indexed()) total++;
  let index = 0;
  for await (const ns of catalog.indexed()) {
    // A namespace created after the count makes the walk longer than announced.
    yield { ns, index, total: Math.max(total, index + 1) };
    index++;
  }
}
