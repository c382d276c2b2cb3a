// Tool detection shared by the e2e suites: a missing client skips its tests with a printed
// reason on a developer machine, and fails the run under WHARF_REQUIRE_TOOLS=1 (set by CI), so
// CI can never report a green, empty run.

/** Whether `cmd args` runs and exits 0. */
export function runs(cmd: string, args: string[]): boolean {
  try {
    return new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

export function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * The reason `suite` cannot run (`missing`, with the `install` hint), or null when nothing is
 * missing. Throws under WHARF_REQUIRE_TOOLS=1.
 */
export function missingReason(suite: string, missing: string[], install: string): string | null {
  if (missing.length === 0) return null;
  const reason = `missing ${missing.join(", ")} (${install})`;
  if (Deno.env.get("WHARF_REQUIRE_TOOLS") === "1") {
    throw new Error(`WHARF_REQUIRE_TOOLS=1 but the ${suite} e2e tests cannot run: ${reason}`);
  }
  console.warn(`SKIPPING ${suite} e2e tests: ${reason}`);
  return reason;
}

/** A background daemon whose stderr is kept for failure messages. */
export interface Daemon {
  log(): string;
  /** SIGTERM, then waits for it to exit */
  stop(): Promise<void>;
}

/**
 * Spawns `cmd args` and waits until `ready()` is true (polled every 100 ms, up to `timeoutMs`);
 * on timeout the daemon is stopped and the error carries its log.
 */
export async function startDaemon(
  cmd: string,
  args: string[],
  ready: () => Promise<boolean>,
  timeoutMs = 15_000,
): Promise<Daemon> {
  const child = new Deno.Command(cmd, { args, stdout: "null", stderr: "piped", stdin: "null" })
    .spawn();
  let log = "";
  const pump = (async () => {
    const dec = new TextDecoder();
    for await (const c of child.stderr) log += dec.decode(c, { stream: true });
  })();
  const daemon: Daemon = {
    log: () => log,
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await pump.catch(() => {});
    },
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) {
      await daemon.stop();
      throw new Error(`${cmd} did not come up:\n${log.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return daemon;
}
