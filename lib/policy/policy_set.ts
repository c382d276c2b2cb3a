// The global policy and the repository policies, compiled once at startup. A request is allowed
// only when the global policy and the policy of the namespace's repository (when it has one)
// both allow it.
import { type Config, repositoryOf } from "../config/mod.ts";
import { AccessPolicy, type PolicyIdentity, type PolicyRequest } from "./access_policy.ts";

export class PolicySet {
  private global: AccessPolicy;
  private repos = new Map<string, AccessPolicy>();

  /** Throws PolicyCompileError naming the policy and rule on a CEL syntax error. */
  constructor(private readonly cfg: Config) {
    this.global = AccessPolicy.compile(cfg.global.accessPolicy, "global.access_policy");
    for (const rc of cfg.repositories.values()) {
      if (rc.accessPolicy) {
        this.repos.set(
          rc.name,
          AccessPolicy.compile(rc.accessPolicy, `repository."${rc.name}".access_policy`),
        );
      }
    }
  }

  /** Takes over `next`'s compiled policies (a config reload; `cfg` is the same live object). */
  adopt(next: PolicySet): void {
    this.global = next.global;
    this.repos = next.repos;
  }

  /** Fills `request.repository` from the namespace and evaluates global, then repository. */
  allows(request: PolicyRequest, identity: PolicyIdentity): boolean {
    let repoPolicy: AccessPolicy | undefined;
    if (request.namespace !== undefined) {
      const repo = repositoryOf(this.cfg, request.namespace).name;
      request = { ...request, repository: repo };
      repoPolicy = this.repos.get(repo);
    }
    if (!this.global.allows(request, identity)) return false;
    return repoPolicy ? repoPolicy.allows(request, identity) : true;
  }
}
