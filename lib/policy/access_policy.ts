// CEL access policies. A policy is `default` plus `rules`: under "deny" a request is allowed when
// any rule evaluates to true (rules grant); under "allow" it is refused when any rule evaluates
// to true (rules refuse). A rule that errors (e.g. reads an absent field without has()) or
// yields a non-bool counts against the request: it grants nothing under "deny" and refuses
// under "allow" — policies fail closed.
import { parse } from "@marcbachmann/cel-js";

export interface PolicyConfig {
  default: "allow" | "deny";
  rules: string[];
}

/** `request` as CEL sees it; absent fields are left out so `has()` reports them absent. */
export interface PolicyRequest {
  action: string;
  method: string;
  client_ip?: string;
  namespace?: string;
  repository?: string;
  digest?: string;
  reference?: string;
  tag?: string;
  queue?: string;
}

export interface PolicyIdentity {
  id?: string;
  username?: string;
  provider?: string;
  claims?: Record<string, unknown>;
  certificate?: { common_name?: string; organizations: string[]; organizational_units: string[] };
}

/**
 * `image` as CEL sees it (issue 34), for the image a manifest read or the signatures endpoint
 * names: its signature verdict in the repository (false where the repository verifies nothing).
 */
export interface PolicyImage {
  digest: string;
  verified: boolean;
  /** verified, unverified, artifact (a signature or other referrer), unjudged, unknown */
  state: string;
  /** waiting for its signature (enforce) */
  held: boolean;
  /** the valid signers: key names (`key:<name>`), certificate identities, notation subjects */
  signers: string[];
}

export class PolicyCompileError extends Error {}

type Program = (ctx: Record<string, unknown>) => unknown;

export class AccessPolicy {
  private constructor(
    readonly defaultEffect: "allow" | "deny",
    private readonly programs: Program[],
    /** whether a rule reads `image` (its facts are then looked up before the decision) */
    readonly readsImage = false,
  ) {}

  /** Compiles once at startup; a syntax error names the policy and the rule. */
  static compile(cfg: PolicyConfig, where: string): AccessPolicy {
    const programs = cfg.rules.map((src, i) => {
      try {
        return parse(src) as unknown as Program;
      } catch (e) {
        throw new PolicyCompileError(
          `${where}.rules[${i}] (${src}): ${(e as Error).message.split("\n")[0]}`,
        );
      }
    });
    return new AccessPolicy(cfg.default, programs, cfg.rules.some((r) => /\bimage\b/.test(r)));
  }

  static allowAll(): AccessPolicy {
    return new AccessPolicy("allow", []);
  }

  /** `image`: the image's verdict, for rules that read it; absent, such a rule fails closed. */
  allows(request: PolicyRequest, identity: PolicyIdentity, image?: PolicyImage): boolean {
    const ctx: Record<string, unknown> = { request: clean(request), identity: clean(identity) };
    if (image) ctx.image = image;
    if (this.defaultEffect === "deny") return this.programs.some((p) => run(p, ctx) === true);
    return !this.programs.some((p) => run(p, ctx) !== false);
  }
}

function run(p: Program, ctx: Record<string, unknown>): unknown {
  try {
    return p(ctx);
  } catch {
    return undefined;
  }
}

function clean<T extends object>(o: T): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null) out[k] = v;
  return out;
}
