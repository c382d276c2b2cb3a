// The global policy and the repository policies, compiled once at startup. A request is allowed
// only when the global policy and the policy of the namespace's repository (when it has one)
// both allow it.
import { type Config, repositoryOf } from "../config/mod.ts";
import {
  AccessPolicy,
  type PolicyIdentity,
  type PolicyImage,
  type PolicyRequest,
} from "./access_policy.ts";

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
  allows(request: PolicyRequest, identity: PolicyIdentity, image?: PolicyImage): boolean {
    let repoPolicy: AccessPolicy | undefined;
    if (request.namespace !== undefined) {
      const repo = repositoryOf(this.cfg, request.namespace).name;
      request = { ...request, repository: repo };
      repoPolicy = this.repos.get(repo);
    }
    if (!this.global.allows(request, identity, image)) return false;
    return repoPolicy ? repoPolicy.allows(request, identity, image) : true;
  }

  /**
   * An explicit grant (held images, issue 34: `get-held`): allowed, and by a rule of a
   * default-deny policy (global or the repository's). Under default-allow policies alone every
   * action is allowed unless refused, which would show held images to everyone; there a
   * request is granted nothing by default.
   */
  grants(request: PolicyRequest, identity: PolicyIdentity): boolean {
    const repoPolicy = request.namespace !== undefined
      ? this.repos.get(repositoryOf(this.cfg, request.namespace).name)
      : undefined;
    const explicit = this.global.defaultEffect === "deny" || repoPolicy?.defaultEffect === "deny";
    return explicit && this.allows(request, identity);
  }

  /** Whether any rule reads `image` (manifest reads then look its verdict up first). */
  get readsImage(): boolean {
    return this.global.readsImage || [...this.repos.values()].some((p) => p.readsImage);
  }
}
