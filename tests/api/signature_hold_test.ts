// Verified before visible (issue 34 items 3 and 5) against real Wharf processes: an image pushed
// into an `enforce` repository is served only once a signature by a trusted key verifies —
// until then its tag and digest answer 403 DENIED naming what is missing to everyone but its
// pusher and roles granted get-held, and the signature's arrival (before or after the image)
// releases it at once. cosign tag signatures are written here by cosign's published format
// (tests/helpers/cosign.ts: ECDSA P-256 over the simple-signing payload).
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import {
  cosignSignature,
  makeKey,
  pushSignature,
  type SigningKey,
  verifyToml,
} from "../helpers/cosign.ts";
import { distinctManifest, putManifest } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";
import { identityTables } from "../helpers/identities.ts";

const NS = "signed/app";
const PASSWORDS = { alice: "alice-pw-3b7e01", bob: "bob-pw-5d2a77", admin: "admin-pw-77e1" };
const basic = (user: keyof typeof PASSWORDS) => ({
  authorization: `Basic ${btoa(`${user}:${PASSWORDS[user]}`)}`,
});

/** Everyone may do everything but see held images; admin is granted get-held explicitly. */
const POLICY = `
[global.access_policy]
default = "deny"
rules = [
  'request.action != "get-held"',
  'request.action == "get-held" && has(identity.username) && identity.username == "admin"',
]
`;

async function get(s: TestServer, ref: string, headers: Record<string, string> = {}) {
  return await req(s, `/v2/${NS}/manifests/${ref}`, { headers });
}

async function status(s: TestServer, ref: string, headers: Record<string, string> = {}) {
  const r = await req(s, `/v2/${NS}/_svc/signatures/${ref}`, { headers });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  return JSON.parse(text);
}

async function expectDenied(r: Response, digest: string): Promise<string> {
  const e = await assertErrorCode(r, 403, "DENIED");
  const detail = String(e.detail);
  assert.match(detail, new RegExp(`no signature by a trusted key for ${digest}`));
  return detail;
}

Deno.test("verify enforce: holds, releases and who sees a held image", serverTestOpts, async () => {
  const key = await makeKey();
  const config = (await identityTables(PASSWORDS)) + POLICY +
    verifyToml("signed", "enforce", { ci: key });
  await withServer({ config }, async (s) => {
    const image = await distinctManifest("held");

    // An unsigned push is accepted, held, and says so.
    const put = await putManifest(s, NS, "v1", image.body, undefined, "", basic("alice"));
    assert.equal(put.status, 201, await put.text());
    assert.match(put.headers.get("warning") ?? "", /^299 - "held: no signature by a trusted key/);

    // Nobody but its pusher (and admin, granted get-held) sees it, by tag or by digest.
    await expectDenied(await get(s, "v1"), image.digest);
    const detail = await expectDenied(await get(s, "v1", basic("bob")), image.digest);
    assert.match(detail, /tag v1 signed\/app@sha256:[0-9a-f]{64} is held until it is signed/);
    await expectDenied(await get(s, image.digest, basic("bob")), image.digest);
    // HEAD carries no body: its status is what counts.
    const head = await req(s, `/v2/${NS}/manifests/v1`, { method: "HEAD" });
    assert.equal(head.status, 403);
    // The tag is not listed while it waits.
    const tags = await (await req(s, `/v2/${NS}/tags/list`)).json().catch(() => null);
    assert.ok(!tags?.tags?.includes("v1"), JSON.stringify(tags));

    for (const who of ["alice", "admin"] as const) {
      const r = await get(s, "v1", basic(who));
      assert.equal(r.status, 200, `${who}: ${await r.clone().text()}`);
      assert.equal(r.headers.get("docker-content-digest"), image.digest);
      assert.match(r.headers.get("warning") ?? "", /^299 - "held: /);
      await r.body?.cancel();
      const d = await get(s, image.digest, basic(who));
      assert.equal(d.status, 200, who);
      await d.body?.cancel();
    }

    // The signatures endpoint says why.
    const held = await status(s, "v1", basic("alice"));
    assert.equal(held.digest, image.digest);
    assert.equal(held.mode, "enforce");
    assert.equal(held.state, "unverified");
    assert.equal(held.verified, false);
    assert.equal(held.held, true);
    assert.deepEqual(held.hold.tags, ["v1"]);
    assert.match(held.reason, /no signature by a trusted key/);

    // A later signature push releases it at once, tag and all.
    const sig = await cosignSignature(key, `127.0.0.1/${NS}`, image.digest);
    const pushed = await pushSignature(s, NS, sig, basic("bob"));
    assert.equal(pushed.status, 201, await pushed.text());
    const released = await get(s, "v1");
    assert.equal(released.status, 200, await released.clone().text());
    assert.equal(released.headers.get("docker-content-digest"), image.digest);
    assert.equal(released.headers.get("warning"), null);
    assert.deepEqual(new Uint8Array(await released.arrayBuffer()), image.body);
    const list = await (await req(s, `/v2/${NS}/tags/list`)).json();
    assert.ok(list.tags.includes("v1"), JSON.stringify(list));
    const ok = await status(s, "v1");
    assert.equal(ok.verified, true);
    assert.equal(ok.held, false);
    assert.equal(ok.hold, null);
    assert.equal(ok.current, true);
    assert.deepEqual(
      ok.signers.map((x: { signer: string; valid: boolean; format: string }) => [
        x.format,
        x.signer,
        x.valid,
      ]),
      [["cosign-tag", "key:ci", true]],
    );
    assert.equal(ok.signers[0].artifact, sig.digest);

    // Metrics count the verdicts, the hold, its refusals and its release.
    const m = await (await req(s, "/metrics", { headers: basic("admin") })).text();
    for (
      const line of [
        'wharf_signature_holds_total{repository="signed",event="held"} 1',
        'wharf_signature_holds_total{repository="signed",event="released"} 1',
        'wharf_signature_verdicts_total{repository="signed",result="verified"} 1',
        'wharf_signature_verdicts_total{repository="signed",result="artifact"} 1',
      ]
    ) {
      assert.ok(
        m.includes(line),
        `${line} in\n${m.split("\n").filter((l) => l.includes("signature")).join("\n")}`,
      );
    }
    assert.match(m, /wharf_signature_holds_total\{repository="signed",event="denied"\} [1-9]/);
    assert.match(m, /wharf_signature_verify_seconds_count [1-9]/);
  });
});

Deno.test(
  "verify enforce: a signature pushed before its image makes it visible at once",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("signed", "enforce", { ci: key }) }, async (s) => {
      const image = await distinctManifest("signed first");
      const sig = await cosignSignature(key, `127.0.0.1/${NS}`, image.digest);
      assert.equal((await pushSignature(s, NS, sig)).status, 201);
      const put = await putManifest(s, NS, "v1", image.body);
      assert.equal(put.status, 201, await put.text());
      assert.equal(put.headers.get("warning"), null);
      const r = await get(s, "v1");
      assert.equal(r.status, 200, await r.clone().text());
      assert.equal(r.headers.get("warning"), null);
      await r.body?.cancel();
      // The signature manifest itself is never held.
      const sr = await get(s, sig.tag);
      assert.equal(sr.status, 200);
      await sr.body?.cancel();
    });
  },
);

Deno.test(
  "verify enforce: wrong key, tampered payload, another image's payload stay held with the reason",
  serverTestOpts,
  async () => {
    const trusted = await makeKey();
    const stranger = await makeKey();
    await withServer({ config: verifyToml("signed", "enforce", { ci: trusted }) }, async (s) => {
      const other = await distinctManifest("other");
      const cases: [string, (d: string) => ReturnType<typeof cosignSignature>, RegExp][] = [
        ["wrong key", (d) => cosignSignature(stranger, `x/${NS}`, d), /key|trusted/i],
        [
          "tampered",
          (d) => cosignSignature(trusted, `x/${NS}`, d, { tamper: true }),
          /untrusted key|does not verify/i,
        ],
        [
          "another image",
          (d) => cosignSignature(trusted, `x/${NS}`, d, { payloadDigest: other.digest }),
          new RegExp(other.digest.slice(7, 19)),
        ],
      ];
      for (const [name, sign, why] of cases) {
        const image = await distinctManifest(name);
        assert.equal((await putManifest(s, NS, name.replace(/ /g, "-"), image.body)).status, 201);
        assert.equal((await pushSignature(s, NS, await sign(image.digest))).status, 201);
        const detail = await expectDenied(await get(s, image.digest), image.digest);
        assert.match(detail, why, `${name}: ${detail}`);
        const st = await status(s, image.digest);
        assert.equal(st.verified, false, name);
        assert.equal(st.held, true, name);
        assert.equal(st.signers.length, 1, name);
        assert.equal(st.signers[0].valid, false, name);
        assert.match(st.signers[0].reason, why, `${name}: ${st.signers[0].reason}`);
      }
    });
  },
);

Deno.test("verify: User-Agent: cosign changes nothing", serverTestOpts, async () => {
  const key = await makeKey();
  await withServer({ config: verifyToml("signed", "enforce", { ci: key }) }, async (s) => {
    const ua = { "user-agent": "cosign/v2.4.1 (linux; amd64)" };
    const image = await distinctManifest("ua");
    const put = await putManifest(s, NS, "v1", image.body, undefined, "", ua);
    assert.equal(put.status, 201);
    assert.match(put.headers.get("warning") ?? "", /held/);
    await expectDenied(await get(s, "v1", ua), image.digest);
    await expectDenied(await get(s, image.digest, { "user-agent": "cosign" }), image.digest);
    const st = await status(s, "v1", ua);
    assert.equal(st.held, true);
  });
});

Deno.test(
  "verify warn: everything is served, marked with a Warning and an event",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    const hook = startReceiver();
    const config = verifyToml("signed", "warn", { ci: key }) +
      `\n[event_webhook.sig]\nurl = "${hook.url}"\nevents = ["image.unverified", "image.verified", "image.held"]\n`;
    try {
      await withServer({ config }, async (s) => {
        const image = await distinctManifest("warned");
        const put = await putManifest(s, NS, "v1", image.body);
        assert.equal(put.status, 201);
        assert.equal(put.headers.get("warning"), null);
        const r = await get(s, "v1");
        assert.equal(r.status, 200);
        await r.body?.cancel();
        assert.equal(
          r.headers.get("warning"),
          `299 - "unsigned: no signature by a trusted key for ${image.digest}"`,
        );
        await hook.waitFor((d) => d.some((x) => x.event.kind === "image.unverified"), 10_000);
        const ev = hook.ofKind("image.unverified")[0].event;
        assert.equal(ev.digest, image.digest);
        assert.equal((ev.signature as { mode: string }).mode, "warn");
        assert.equal((ev.signature as { verified: boolean }).verified, false);
        // Signed, the Warning goes and image.verified is delivered.
        const sig = await cosignSignature(key, `x/${NS}`, image.digest);
        assert.equal((await pushSignature(s, NS, sig)).status, 201);
        const v = await get(s, "v1");
        assert.equal(v.status, 200);
        assert.equal(v.headers.get("warning"), null);
        await v.body?.cancel();
        await hook.waitFor((d) => d.some((x) => x.event.kind === "image.verified"), 10_000);
        assert.equal(hook.ofKind("image.held").length, 0);
      });
    } finally {
      await hook.stop();
    }
  },
);

Deno.test("verify enforce: events of a hold and its release", serverTestOpts, async () => {
  const key = await makeKey();
  const hook = startReceiver();
  const config = verifyToml("signed", "enforce", { ci: key }) +
    `\n[event_webhook.sig]\nurl = "${hook.url}"\nevents = ["image.held", "image.verified", "image.released", "tag.create"]\n`;
  try {
    await withServer({ config }, async (s) => {
      const image = await distinctManifest("events");
      assert.equal((await putManifest(s, NS, "v1", image.body)).status, 201);
      await hook.waitFor((d) => d.some((x) => x.event.kind === "image.held"), 10_000);
      assert.deepEqual(
        (hook.ofKind("image.held")[0].event.signature as { held_tags: string[] }).held_tags,
        ["v1"],
      );
      // The tag is created when it becomes visible, not before.
      assert.equal(hook.ofKind("tag.create").filter((d) => d.event.tag === "v1").length, 0);
      const sig = await cosignSignature(key, `x/${NS}`, image.digest);
      assert.equal((await pushSignature(s, NS, sig)).status, 201);
      await hook.waitFor(
        (d) =>
          ["image.verified", "image.released"].every((k) => d.some((x) => x.event.kind === k)) &&
          d.some((x) => x.event.kind === "tag.create" && x.event.tag === "v1"),
        10_000,
      );
      const rel = hook.ofKind("image.released")[0].event;
      assert.equal(rel.digest, image.digest);
      assert.deepEqual((rel.signature as { signers: string[] }).signers, ["key:ci"]);
    });
  } finally {
    await hook.stop();
  }
});

/** Rewrites the running server's config and waits for its reload line. */
async function reload(s: TestServer, text: string): Promise<void> {
  const lines = () => (s.output().match(/"msg":"config reloaded"/g) ?? []).length;
  const before = lines();
  await Deno.writeTextFile(`${s.configPath}.tmp`, text);
  await Deno.rename(`${s.configPath}.tmp`, s.configPath);
  const end = Date.now() + 10_000;
  while (lines() <= before) {
    if (Date.now() > end) assert.fail(`no reload:\n${s.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function until(what: string, f: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

Deno.test(
  "verify: a trusted key removed by a reload holds again what only it signed",
  serverTestOpts,
  async () => {
    const kept = await makeKey();
    const removed = await makeKey();
    const both = verifyToml("signed", "enforce", { kept, removed });
    await withServer({ config: both }, async (s) => {
      const base = await Deno.readTextFile(s.configPath);
      const byRemoved = await distinctManifest("removed only");
      const byBoth = await distinctManifest("both");
      const sign = async (k: SigningKey, d: string) =>
        assert.equal(
          (await pushSignature(s, NS, await cosignSignature(k, `x/${NS}`, d))).status,
          201,
        );
      assert.equal((await putManifest(s, NS, "a", byRemoved.body)).status, 201);
      await sign(removed, byRemoved.digest);
      assert.equal((await putManifest(s, NS, "b", byBoth.body)).status, 201);
      await sign(kept, byBoth.digest);
      for (const t of ["a", "b"]) {
        const r = await get(s, t);
        assert.equal(r.status, 200, t);
        await r.body?.cancel();
      }
      await reload(s, base.replace(/^removed = """[\s\S]*?"""\n/m, ""));
      await until("a held again", async () => {
        const r = await get(s, "a");
        await r.body?.cancel();
        return r.status === 403;
      });
      await expectDenied(await get(s, "a"), byRemoved.digest);
      const st = await status(s, "a");
      assert.equal(st.held, true);
      assert.equal(st.current, true);
      const b = await get(s, "b");
      assert.equal(b.status, 200, "signed by the key that stays");
      await b.body?.cancel();
      // The key back: released again.
      await reload(s, base);
      await until("a released again", async () => {
        const r = await get(s, "a");
        await r.body?.cancel();
        return r.status === 200;
      });
    });
  },
);

Deno.test(
  "verify enforce: a hold that runs out deletes or keeps the image, with an event",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    const hook = startReceiver();
    const config =
      verifyToml("signed", "enforce", { ci: key }, `hold_secs = 1\non_expiry = "delete"`) +
      verifyToml("kept", "enforce", { ci: key }, `hold_secs = 1\non_expiry = "keep"`) +
      `\n[event_webhook.sig]\nurl = "${hook.url}"\nevents = ["image.held", "image.rejected"]\n`;
    try {
      await withServer({ config }, async (s) => {
        const a = await distinctManifest("expires");
        const b = await distinctManifest("kept");
        assert.equal((await putManifest(s, NS, "v1", a.body)).status, 201);
        assert.equal((await putManifest(s, "kept/app", "v1", b.body)).status, 201);
        await hook.waitFor((d) => d.some((x) => x.event.kind === "image.rejected"), 15_000);
        const rej = hook.ofKind("image.rejected")[0].event;
        assert.equal(rej.digest, a.digest);
        assert.equal((rej.signature as { expired: boolean }).expired, true);
        await assertErrorCode(await get(s, a.digest), 404, "MANIFEST_UNKNOWN");
        await assertErrorCode(await get(s, "v1"), 404, "MANIFEST_UNKNOWN");
        await hook.waitFor(
          (d) =>
            d.some((x) =>
              x.event.kind === "image.held" && x.event.digest === b.digest &&
              (x.event.signature as { expired?: boolean }).expired === true
            ),
          15_000,
        );
        const r = await req(s, `/v2/kept/app/manifests/${b.digest}`);
        await expectDenied(r, b.digest);
        const st = await (await req(s, `/v2/kept/app/_svc/signatures/v1`)).json();
        assert.equal(st.held, true);
        assert.equal(st.hold.expired, true);
        // Still released by a signature after its hold ran out.
        const sig = await cosignSignature(key, "x/kept/app", b.digest);
        assert.equal((await pushSignature(s, "kept/app", sig)).status, 201);
        const ok = await req(s, `/v2/kept/app/manifests/v1`);
        assert.equal(ok.status, 200);
        await ok.body?.cancel();
      });
    } finally {
      await hook.stop();
    }
  },
);

Deno.test(
  "verify: turning enforce off shows what was held, its tags written",
  serverTestOpts,
  async () => {
    const key = await makeKey();
    await withServer({ config: verifyToml("signed", "enforce", { ci: key }) }, async (s) => {
      const base = await Deno.readTextFile(s.configPath);
      const image = await distinctManifest("turned off");
      assert.equal((await putManifest(s, NS, "v1", image.body)).status, 201);
      await expectDenied(await get(s, "v1"), image.digest);
      await reload(s, base.replace('mode = "enforce"', 'mode = "off"'));
      await until("v1 served", async () => {
        const r = await get(s, "v1");
        await r.body?.cancel();
        return r.status === 200;
      }).catch((e) => {
        console.log(s.output());
        throw e;
      });
      const list = await (await req(s, `/v2/${NS}/tags/list`)).json();
      assert.deepEqual(list.tags, ["v1"]);
    });
  },
);
