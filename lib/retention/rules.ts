// Retention keep-rules (issue 14): CEL expressions over `image` (tag, digest, namespace,
// pushed_at, last_pulled_at) with now(), days(n), hours(n), top_pushed(n) and top_pulled(n).
// A tag is kept when any rule yields true; a rule that errors or yields a non-bool keeps too
// (fail-open: retention deletes, so doubt keeps), and is reported so the operator can fix it.
import { Environment, evaluate } from "@marcbachmann/cel-js";
import type { Config, RetentionPolicyConfig } from "../config/mod.ts";

export class RetentionCompileError extends Error {}

/** What a rule sees of one tag. */
export interface ImageFacts {
  tag: string;
  digest: string;
  namespace: string;
  /** ms since the epoch: the tag's creation time (backdated by replication, SPEC rule 6) */
  pushedAt: number;
  /** ms since the epoch of the newest pull of the tag's manifest; 0 when never pulled */
  lastPulledAt: number;
  /** 0-based place among the namespace's tags, newest push first */
  pushedRank: number;
  /** 0-based place among the namespace's tags, newest pull first */
  pulledRank: number;
}

// The rankings and the clock are per evaluation: CEL functions cannot see the context, so the
// image being judged is set here just before its (synchronous) evaluation.
let judged: ImageFacts | null = null;
let clock = 0;

// cel-js builds durations with its own class; take the constructor from a value it made.
const Duration = (evaluate('duration("0s")') as object).constructor as new (
  seconds: bigint | number,
  nanos?: number,
) => unknown;

const env = new Environment({ unlistedVariablesAreDyn: true })
  .registerFunction("now(): google.protobuf.Timestamp", () => new Date(clock))
  .registerFunction(
    "days(int): google.protobuf.Duration",
    (n: bigint) => new Duration(n * 86_400n),
  )
  .registerFunction(
    "hours(int): google.protobuf.Duration",
    (n: bigint) => new Duration(n * 3_600n),
  )
  .registerFunction("top_pushed(int): bool", (n: bigint) => judged!.pushedRank < Number(n))
  .registerFunction("top_pulled(int): bool", (n: bigint) => judged!.pulledRank < Number(n));

type Program = (ctx: Record<string, unknown>) => unknown;

export interface Verdict {
  keep: boolean;
  /** index of the first rule that kept the tag (true or error) */
  rule: number | null;
  /** errors of rules that failed open, with their index */
  errors: { rule: number; error: string }[];
}

export class RetentionRules {
  private constructor(
    readonly where: string,
    readonly sources: string[],
    private readonly programs: Program[],
  ) {}

  /** Throws RetentionCompileError naming `<where>.rules[i]` on a syntax error. */
  static compile(policy: RetentionPolicyConfig): RetentionRules {
    const programs = policy.rules.map((src, i) => {
      try {
        return env.parse(src) as unknown as Program;
      } catch (e) {
        throw new RetentionCompileError(
          `${policy.where}.rules[${i}] (${src}): ${(e as Error).message.split("\n")[0]}`,
        );
      }
    });
    return new RetentionRules(policy.where, policy.rules, programs);
  }

  /** Whether any rule reads pull times (they are only recorded with update_pull_time). */
  readsPullTimes(): boolean {
    return this.sources.some((s) => /\blast_pulled_at\b|\btop_pulled\s*\(/.test(s));
  }

  judge(img: ImageFacts, now: number): Verdict {
    const errors: Verdict["errors"] = [];
    // No rules: the policy keeps everything rather than deleting a whole namespace.
    if (this.programs.length === 0) return { keep: true, rule: null, errors };
    judged = img;
    clock = now;
    const ctx = {
      image: {
        tag: img.tag,
        digest: img.digest,
        namespace: img.namespace,
        pushed_at: new Date(img.pushedAt),
        last_pulled_at: new Date(img.lastPulledAt),
      },
    };
    try {
      for (let i = 0; i < this.programs.length; i++) {
        let v: unknown;
        try {
          v = this.programs[i](ctx);
        } catch (e) {
          errors.push({ rule: i, error: (e as Error).message.split("\n")[0] });
          return { keep: true, rule: i, errors };
        }
        if (v === true) return { keep: true, rule: i, errors };
        if (v !== false) {
          errors.push({ rule: i, error: `yielded ${typeof v}, not a bool` });
          return { keep: true, rule: i, errors };
        }
      }
      return { keep: false, rule: null, errors };
    } finally {
      judged = null;
    }
  }
}

/**
 * Every retention policy of `cfg`, compiled: the global one under "" and each repository's
 * under its name. Throws RetentionCompileError on the first bad rule.
 */
export function compileRetention(cfg: Config): Map<string, RetentionRules> {
  const out = new Map<string, RetentionRules>();
  if (cfg.global.retentionPolicy) {
    out.set("", RetentionRules.compile(cfg.global.retentionPolicy));
  }
  for (const rc of cfg.repositories.values()) {
    if (rc.retentionPolicy) out.set(rc.name, RetentionRules.compile(rc.retentionPolicy));
  }
  return out;
}

/** The key path of a policy reading pull times while update_pull_time is off, or null. */
export function pullTimesWithoutRecording(
  cfg: Config,
  rules: Map<string, RetentionRules>,
): string | null {
  if (cfg.global.updatePullTime) return null;
  for (const r of rules.values()) if (r.readsPullTimes()) return r.where;
  return null;
}
