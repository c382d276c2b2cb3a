// Which stored reports were built from parses that could not run. Versions before issue 33 read a
// sandbox that could not start (or a child killed from outside) as a verdict on the image: a layer
// recorded `unsupported` with that error was merged as empty, and a plan or content sandbox that
// could not start left the report without files or packages, with a warning saying so. Such a
// report says nothing about the image: it is out of date (Scanner.record), and rescanned once the
// machine may be fixed (report_heal.ts). This version never stores one (Scanner.run).
import { isMachineFailureText } from "../index/mod.ts";

/**
 * The warnings a report got for a part it could not read: a layer with no listing, the plan's
 * merge, the packages' parse. A machine failure after one of these made the whole report moot.
 */
const NOT_READ =
  /^(layer \S+ is (unsupported|unavailable): |the layers' files were not looked through: |packages and config were not read: )/;

/** Whether `report` (as stored) was built while a parse it needed could not run. */
export function builtOnFailedParses(report: { warnings?: unknown }): boolean {
  const warnings = Array.isArray(report.warnings) ? report.warnings : [];
  return warnings.some((w) =>
    typeof w === "string" && NOT_READ.test(w) &&
    (/^layer \S+ is unavailable: /.test(w) || isMachineFailureText(w))
  );
}
