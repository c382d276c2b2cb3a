import type { RequestScope } from "./scope.ts";

const READY_TIMEOUT_MS = 2000;

export async function healthHandler(
  { action: a, registry: reg, services, head }: RequestScope,
): Promise<Response> {
  const json = (status: number, body: unknown) =>
    new Response(head ? null : JSON.stringify(body), {
      status,
      headers: { "Content-Type": "application/json" },
    });
  if (a.name === "healthz") return json(200, { status: "ok" });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(
        () => rej(new Error(`metadata store did not answer in ${READY_TIMEOUT_MS} ms`)),
        READY_TIMEOUT_MS,
      );
    });
    await Promise.race([reg.ready(), timeout]);
    // What the last store operations and the free-space readings left (no store is probed): a
    // full or failing store takes pushes out of this instance's rotation.
    const problems = services.watch ? await Promise.race([services.watch.problems(), timeout]) : [];
    if (problems.length > 0) return json(503, { status: "not_ready", error: problems.join("; ") });
    return json(200, { status: "ready" });
  } catch (e) {
    return json(503, { status: "not_ready", error: (e as Error).message });
  } finally {
    clearTimeout(timer);
  }
}
