// commitWithRetry commits the operation an attempt built and returns only what the attempt
// decided before committing; a write that needs the commit's own versionstamp (a reservation,
// the revision a many-tag push goes on tagging) has the operation note it.

/** `op`, writing its versionstamp into `into` when it commits. */
export function stamping(
  op: Deno.AtomicOperation,
  into: { versionstamp: string | null },
): Deno.AtomicOperation {
  const commit = op.commit.bind(op);
  op.commit = async () => {
    const r = await commit();
    if (r.ok) into.versionstamp = r.versionstamp;
    return r;
  };
  return op;
}
