// The web UI's signature verdicts (issue 34) in chromium against a real Wharf whose repository
// enforces signatures: a held image's page says "held: waiting for a signature" and why (the
// viewer may not pull it), the manifests list shows the held badge and the waiting tag, and once
// a cosign signature lands the image page shows it verified with its signer. Axe on each view,
// screenshots kept.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { cosignSignature, makeKey, pushSignature, verifyToml } from "../helpers/cosign.ts";
import { distinctManifest, putManifest } from "../helpers/oci_content.ts";
import { withServer } from "../helpers/server.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  ...base,
  name: "ui signatures: held page, list badges, verified facts",
  fn: async () => {
    const key = await makeKey();
    const config = `[ui]\nenabled = true\n` + verifyToml("signed", "enforce", { ci: key });
    await withServer({ config }, async (s) => {
      const image = await distinctManifest("ui held");
      const put = await putManifest(s, "signed/app", "v1", image.body);
      assert.equal(put.status, 201);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/signed/app:v1`);
        const held = page.locator("[data-held]");
        await held.waitFor({ timeout: 15_000 });
        assert.equal(await held.getAttribute("data-held"), image.digest);
        const text = await held.innerText();
        assert.match(text, /held: waiting for a signature/);
        assert.match(text, new RegExp(`no signature by a trusted key for ${image.digest}`));
        assert.match(text, /tags waiting: v1/);
        await assertAccessible(page, "held image page");
        await screenshot(page, "signatures-held");

        await page.goto(`${s.url}/signed/app`);
        const row = page.locator(`tr[data-digest="${image.digest}"]`);
        await row.waitFor({ timeout: 15_000 });
        assert.equal(await row.locator("[data-signature]").getAttribute("data-signature"), "held");
        assert.equal(await row.locator("a.tag.held").innerText(), "v1");
        await assertAccessible(page, "manifests list with a held image");
        await screenshot(page, "signatures-list-held");

        const sig = await cosignSignature(key, "ui/signed/app", image.digest);
        assert.equal((await pushSignature(s, "signed/app", sig)).status, 201);
        const r = await req(s, "/v2/signed/app/manifests/v1");
        assert.equal(r.status, 200);
        await r.body?.cancel();

        await page.goto(`${s.url}/signed/app:v1`);
        const facts = page.locator("[data-signatures]");
        await facts.waitFor({ timeout: 15_000 });
        assert.equal(await facts.getAttribute("data-signatures"), "verified");
        const f = await facts.innerText();
        assert.match(f, /verified/);
        assert.match(f, /key:ci/);
        assert.match(f, /cosign-tag/);
        await assertAccessible(page, "verified image page");
        await screenshot(page, "signatures-verified");

        await page.goto(`${s.url}/signed/app`);
        const again = page.locator(`tr[data-digest="${image.digest}"] [data-signature]`);
        await again.waitFor({ timeout: 15_000 });
        assert.equal(await again.getAttribute("data-signature"), "verified");
      } finally {
        await browser.close();
      }
    });
  },
});
