// Waiting for what a server does in the background (a job, a replication, a sweep), polled.

/** Polls `cond` every 100 ms until it holds; fails naming `what` after `ms`. */
export async function until(
  what: string,
  cond: () => Promise<boolean>,
  ms = 30_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
