import assert from "node:assert/strict";
import { buildConfig, ConfigError, loadConfigFiles, repositoryOf, resolveNsParam } from "./mod.ts";

Deno.test("defaults apply without a config file", () => {
  const c = buildConfig({}, []);
  assert.equal(c.server.bindAddress, "0.0.0.0");
  assert.equal(c.server.port, 5000);
  assert.equal(c.global.maxBlobSize, null);
  assert.equal(c.global.maxManifestSize, 4 * 1024 * 1024);
  assert.equal(c.global.allowMissingManifestReferences, true);
  assert.deepEqual(c.global.accessPolicy, { default: "allow", rules: [] });
});

Deno.test("later files win key by key", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(
    `${dir}/a.toml`,
    `[server]\nport = 1234\nbind_address = "127.0.0.1"\n[global]\nimmutable_tags = true\n`,
  );
  await Deno.writeTextFile(
    `${dir}/b.toml`,
    `[server]\nport = 4321\n[repository."hub"]\nnamespace = "docker.io"\nimmutable_tags_exclusions = ["latest"]\n`,
  );
  const c = await loadConfigFiles([`${dir}/a.toml`, `${dir}/b.toml`]);
  assert.equal(c.server.port, 4321);
  assert.equal(c.server.bindAddress, "127.0.0.1");
  assert.equal(c.global.immutableTags, true);
  const hub = c.repositories.get("hub")!;
  assert.equal(hub.namespace, "docker.io");
  assert.ok(hub.immutableTagsExclusions![0].test("latest"));
  assert.ok(!hub.immutableTagsExclusions![0].test("latest-rc"), "exclusions are full-match");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("upstreams and the job queue are read with their defaults", () => {
  const c = buildConfig({
    global: { job_queue: { max_attempts: 3, concurrency: { cache: 8, index: 0 } } },
    repository: {
      hub: {
        revalidate_secs: 60,
        upstream: [
          { url: "https://registry-1.docker.io/", username: "u", password: "p" },
          { url: "https://mirror.example/v", connect_timeout_secs: 2, revalidate_secs: 9 },
        ],
      },
      gh: { upstream: { url: "https://ghcr.io", revalidate_secs: 7 } },
      local: {},
    },
  }, []);
  assert.equal(c.global.jobQueue.maxAttempts, 3);
  assert.deepEqual(c.global.jobQueue.concurrency, {
    cache: 8,
    replication: 2,
    scan: 1,
    index: 0,
    events: 4,
  });
  assert.equal(c.global.jobQueue.leaseSecs, 30);
  const hub = c.repositories.get("hub")!;
  assert.equal(hub.revalidateSecs, 60);
  assert.deepEqual(hub.upstreams![0], {
    url: "https://registry-1.docker.io",
    username: "u",
    password: "p",
    caBundle: null,
    connectTimeoutSecs: 30,
    readTimeoutSecs: 300,
    maxRedirects: 5,
  });
  assert.equal(hub.upstreams![1].connectTimeoutSecs, 2);
  assert.equal(c.repositories.get("gh")!.revalidateSecs, 7, "an upstream's revalidate_secs");
  assert.equal(c.repositories.get("local")!.upstreams, undefined);
  assert.equal(defaultsOf().global.jobQueue.concurrency.index, 1, "defaults are not shared");
});

const defaultsOf = () => buildConfig({}, []);

Deno.test("downstreams are read with their defaults", () => {
  const c = buildConfig({
    repository: {
      app: {
        downstream: [
          { name: "eu", url: "https://eu.example.com/", username: "u", password: "p" },
          {
            name: "dr",
            url: "http://dr:5000/mirror",
            namespace_filter: ["app/team-.*"],
            mode: "reconcile",
            prune: true,
            max_concurrent_transfers: 2,
            reconcile_interval_secs: 60,
          },
        ],
      },
    },
  }, []);
  const [eu, dr] = c.repositories.get("app")!.downstreams!;
  assert.equal(eu.url, "https://eu.example.com");
  assert.equal(eu.mode, "event+reconcile");
  assert.equal(eu.prune, false);
  assert.equal(eu.maxConcurrentTransfers, 4);
  assert.deepEqual(eu.namespaceFilter, []);
  assert.equal(eu.username, "u");
  assert.equal(dr.mode, "reconcile");
  assert.ok(dr.namespaceFilter[0].test("app/team-a"));
  assert.ok(!dr.namespaceFilter[0].test("xapp/team-a"), "full match");
  assert.equal(dr.prune, true);
  assert.equal(dr.reconcileIntervalSecs, 60);
});

Deno.test("invalid config names the key and the file", async () => {
  const dir = await Deno.makeTempDir();
  const bad: [string, RegExp][] = [
    [`[server]\nport = "x"\n`, /bad\.toml: server\.port: must be an integer/],
    [`[global]\nmax_blob_size = -1\n`, /global\.max_blob_size/],
    [
      `[global]\nimmutable_tags_exclusions = ["("]\n`,
      /global\.immutable_tags_exclusions\[0\]: invalid regex/,
    ],
    [`[globl]\n`, /globl: unknown key/],
    [`[repository."Bad Name"]\n`, /repository\."Bad Name": not a valid repository name/],
    [`[global.access_policy]\ndefault = "maybe"\n`, /global\.access_policy\.default/],
    [`[server\n`, /bad\.toml: invalid TOML/],
    [`[server]\ntrusted_proxies = ["10.0.0.0/33"]\n`, /server\.trusted_proxies\[0\]/],
    [
      `[server.tls]\nserver_private_key = "k"\n`,
      /server\.tls\.server_certificate_bundle: is required/,
    ],
    [
      `[server.tls]\nserver_certificate_bundle = "c"\nserver_private_key = "k"\nclient_auth = "required"\n`,
      /client_ca_bundle: is required/,
    ],
    [
      `[auth.identity.a]\nusername = "alice"\npassword = "plain"\n`,
      /auth\.identity\.a\.password: must be an argon2id hash/,
    ],
    [`[auth.oidc.corp]\nissuer = "not a url"\n`, /auth\.oidc\.corp\.issuer/],
    [
      `[auth.token_service]\nsecret_key = "short"\nrealm = "https://r/token"\n`,
      /auth\.token_service\.secret_key: must be at least 32 bytes/,
    ],
    [
      `[repository."a".access_policy]\ndefault = "nope"\n`,
      /repository\."a"\.access_policy\.default/,
    ],
    [`[[repository."hub".upstream]]\nurl = "ftp://x"\n`, /repository\."hub"\.upstream\[0\]\.url/],
    [
      `[[repository."hub".upstream]]\nurl = "https://x"\nusername = "u"\n`,
      /upstream\[0\]\.password: username and password go together/,
    ],
    [
      `[[repository."hub".upstream]]\nurl = "https://x"\nproxy = 1\n`,
      /upstream\[0\]\.proxy: unknown key/,
    ],
    [`[repository."hub"]\nrevalidate_secs = 5\n`, /revalidate_secs: only applies to a repository/],
    [`[global.job_queue]\nmax_attempts = 0\n`, /global\.job_queue\.max_attempts/],
    [
      `[global.job_queue.concurrency]\nmail = 1\n`,
      /global\.job_queue\.concurrency\.mail: unknown key/,
    ],
    [
      `[global.job_queue]\nbackoff_min_ms = 500\nbackoff_max_ms = 100\n`,
      /backoff_max_ms: must not be below backoff_min_ms/,
    ],
    [
      `[[repository."a".downstream]]\nname = "b"\nurl = "https://b"\n[[repository."c".downstream]]\nname = "b"\nurl = "https://c"\n`,
      /repository\."c"\.downstream\[0\]\.name: "b" is already the name of repository\."a"\.downstream\[0\]/,
    ],
    [`[[repository."a".downstream]]\nurl = "https://b"\n`, /downstream\[0\]\.name: is required/],
    [
      `[[repository."a".downstream]]\nname = "b"\nurl = "file:///x"\n`,
      /downstream\[0\]\.url: must be an http/,
    ],
    [
      `[[repository."a".downstream]]\nname = "b"\nurl = "https://b"\nnamespace_filter = ["("]\n`,
      /downstream\[0\]\.namespace_filter\[0\]: invalid regex/,
    ],
    [
      `[[repository."a".downstream]]\nname = "b"\nurl = "https://b"\nmode = "sometimes"\n`,
      /downstream\[0\]\.mode: must be one of/,
    ],
    [
      `[[repository."a".upstream]]\nurl = "https://u"\n[[repository."a".downstream]]\nname = "b"\nurl = "https://b"\n`,
      /repository\."a"\.downstream: a pull-through cache is read-only/,
    ],
  ];
  for (const [text, re] of bad) {
    await Deno.writeTextFile(`${dir}/bad.toml`, text);
    await assert.rejects(
      loadConfigFiles([`${dir}/bad.toml`]),
      (e) => e instanceof ConfigError && re.test(e.message),
      text,
    );
  }
  await assert.rejects(loadConfigFiles([`${dir}/missing.toml`]), /missing\.toml: cannot read/);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a namespace belongs to the longest configured repository prefix, else its first segment", () => {
  const c = buildConfig({ repository: { "a": {}, "a/b": { namespace: "docker.io" } } }, []);
  assert.equal(repositoryOf(c, "a/b/c").name, "a/b");
  assert.equal(repositoryOf(c, "a/bc").name, "a");
  assert.equal(repositoryOf(c, "x/y").name, "x");
  assert.equal(resolveNsParam(c, "docker.io", "library/alpine"), "a/b/library/alpine");
  assert.equal(resolveNsParam(c, "docker.io", "a/b/x"), "a/b/x");
  assert.equal(resolveNsParam(c, "quay.io", "x"), null);
  assert.equal(resolveNsParam(c, null, "x"), null);
});

Deno.test("auth, TLS and policy sections load with their defaults", () => {
  const c = buildConfig({
    server: {
      trusted_proxies: ["10.0.0.0/8", "::1"],
      tls: {
        server_certificate_bundle: "c.pem",
        server_private_key: "k.pem",
        client_ca_bundle: "ca.pem",
      },
    },
    auth: {
      identity: {
        admin: { username: "alice", password: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA" },
      },
      oidc: {
        corp: {
          issuer: "https://id.example",
          audience: "wharf",
          required_claims: { groups: ["ops", "dev"] },
        },
      },
      token_service: { secret_key: "x".repeat(32), realm: "https://registry.example/token" },
    },
    global: { access_policy: { default: "deny", rules: ["true"] } },
    repository: { "a": { access_policy: { default: "allow", rules: ["false"] } } },
  }, []);
  assert.deepEqual(c.server.trustedProxies, ["10.0.0.0/8", "::1"]);
  assert.equal(c.server.tls?.clientAuth, "optional", "a client CA bundle alone means optional");
  assert.equal(c.auth.identities[0].id, "admin");
  const corp = c.auth.oidc.get("corp")!;
  assert.deepEqual(corp.audience, ["wharf"]);
  assert.equal(corp.jwksUri, null);
  assert.deepEqual(corp.requiredClaims, { groups: ["ops", "dev"] });
  assert.equal(c.auth.tokenService?.service, "registry.example");
  assert.equal(c.auth.tokenService?.ttlSecs, 300);
  assert.deepEqual(c.global.accessPolicy, { default: "deny", rules: ["true"] });
  assert.deepEqual(c.repositories.get("a")?.accessPolicy, { default: "allow", rules: ["false"] });
});

Deno.test("prefetch_max_bytes: 4 MiB by default on a pull-through repository, 0 turns it off, hosted ones refuse it", () => {
  const up = { upstream: [{ url: "https://registry-1.docker.io" }] };
  const c = buildConfig({
    repository: {
      hub: up,
      off: { ...up, prefetch_max_bytes: 0 },
      some: { ...up, prefetch_max_bytes: 65536 },
      local: {},
    },
  }, []);
  assert.equal(c.repositories.get("hub")!.prefetchMaxBytes, 4 * 1024 * 1024);
  assert.equal(c.repositories.get("off")!.prefetchMaxBytes, 0);
  assert.equal(c.repositories.get("some")!.prefetchMaxBytes, 65536);
  assert.equal(c.repositories.get("local")!.prefetchMaxBytes, undefined);
  assert.throws(
    () => buildConfig({ repository: { local: { prefetch_max_bytes: 1 } } }, []),
    (e) => e instanceof ConfigError && /prefetch_max_bytes.*only applies/.test(e.message),
  );
  assert.throws(
    () => buildConfig({ repository: { hub: { ...up, prefetch_max_bytes: -1 } } }, []),
    (e) => e instanceof ConfigError && /prefetch_max_bytes/.test(e.message),
  );
});

Deno.test("[global.integrity]: off by default at 16 MiB/s; interval and rate read; bad values name the key", () => {
  const d = buildConfig({}, []);
  assert.deepEqual(d.global.integrity, { intervalSecs: null, bytesPerSec: 16 * 1024 * 1024 });
  const c = buildConfig(
    { global: { integrity: { interval_secs: 86400, bytes_per_sec: 1000 } } },
    [],
  );
  assert.deepEqual(c.global.integrity, { intervalSecs: 86400, bytesPerSec: 1000 });
  for (
    const [verify, re] of [
      [{ bytes_per_sec: 0 }, /global\.integrity\.bytes_per_sec/],
      [{ interval_secs: 0 }, /global\.integrity\.interval_secs/],
      [{ every: 1 }, /global\.integrity\.every: unknown key/],
    ] as const
  ) {
    assert.throws(() => buildConfig({ global: { integrity: verify } }, ["x.toml"]), re);
  }
});
