// The child's side of a sandboxed parse: its argument in, one JSON line out. A failure the
// child can name (a budget it counts itself, the data's own fault) is a line too; anything that
// kills it is judged by the parent from its exit.
import { BudgetExceededError } from "./errors.ts";

export function childArgs<T>(): T {
  return JSON.parse(Deno.args[0] ?? "null") as T;
}

/** The line the parent reads: `{ok}` or `{error, budget?, limit?, reached?, permanent?}`. */
export type ChildLine =
  | { ok: unknown }
  | { error: string; budget?: string; limit?: number; reached?: string; permanent?: boolean };

/** Runs `main` and prints its result (or its error) as the child's one line, then exits. */
export async function childMain(main: () => Promise<unknown>): Promise<never> {
  let line: ChildLine;
  try {
    line = { ok: await main() };
  } catch (e) {
    line = e instanceof BudgetExceededError
      ? { error: e.message, budget: e.budget, limit: e.limit, reached: e.reached }
      : {
        error: e instanceof Error ? e.message || e.name : String(e),
        permanent: (e as { permanent?: unknown })?.permanent === true,
      };
  }
  const bytes = new TextEncoder().encode(JSON.stringify(line) + "\n");
  for (let at = 0; at < bytes.length;) at += await Deno.stdout.write(bytes.subarray(at));
  Deno.exit(0);
}
