// UI sign-in (`[ui.oidc]`) end to end in chromium: a 401 starts the authorization code flow with
// PKCE (S256) at the test issuer, which checks the verifier when the code is exchanged; the state
// and the ID token's nonce are checked by the UI; the token goes to the API as a bearer; the
// signed-in user sees what its policy allows and the 403 message elsewhere; sign-out.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";
import { startIssuer } from "../helpers/oidc_issuer.ts";
import { distinctManifest, putManifestOk } from "../helpers/oci_content.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  ...base,
  name: "ui in chromium: OIDC sign-in with PKCE, state and nonce checked, bearer to the API, 403",
  fn: async () => {
    const iss = await startIssuer();
    try {
      const config = `
[ui]
enabled = true
name = "Corp registry"
[ui.oidc]
provider = "corp"
client_id = "wharf-ui"
[auth.oidc.corp]
issuer = "${iss.issuer}"
audience = "wharf-ui"
[global.access_policy]
default = "deny"
rules = [
  'request.action in ["ui-asset", "ui-config"]',
  # the test pushes anonymously
  '!has(identity.username) && request.action in ["put-manifest", "start-upload", "get-api-version"]',
  'identity.provider == "oidc:corp" && identity.username == "user-1" && (request.action in ["list-repositories", "list-namespaces"] || request.namespace.startsWith("team/"))',
]
`;
      await withServer({ config }, async (s) => {
        await putManifestOk(s, "team/app", "v1", (await distinctManifest("team")).body);
        await putManifestOk(s, "secret/app", "v1", (await distinctManifest("secret")).body);
        const cfg = await (await req(s, "/v2/_svc/ui/config")).json();
        assert.deepEqual(cfg, {
          name: "Corp registry",
          oidc: { issuer: iss.issuer, client_id: "wharf-ui", scopes: "openid profile email" },
        });
        const browser = await launch();
        try {
          const context = await browser.newContext();
          const page = await context.newPage();
          const authorizeUrls: string[] = [];
          const apiAuth: (string | null)[] = [];
          page.on("request", (r) => {
            if (r.url().startsWith(`${iss.issuer}/authorize`)) authorizeUrls.push(r.url());
            if (r.url().startsWith(`${s.url}/v2/`)) {
              apiAuth.push(r.headers()["authorization"] ?? null);
            }
          });
          // anonymous: the namespace answers 401, which starts the sign-in; back on the page
          await page.goto(`${s.url}/team/app:v1`);
          await page.waitForSelector("section[data-manifest]");
          assert.equal(new URL(page.url()).pathname, "/team/app:v1");
          assert.equal(authorizeUrls.length, 1);
          const auth = new URL(authorizeUrls[0]).searchParams;
          assert.equal(auth.get("response_type"), "code");
          assert.equal(auth.get("client_id"), "wharf-ui");
          assert.equal(auth.get("code_challenge_method"), "S256");
          assert.match(auth.get("code_challenge")!, /^[A-Za-z0-9_-]{43}$/);
          assert.ok(auth.get("state") && auth.get("nonce"));
          assert.equal(auth.get("scope"), "openid profile email");
          assert.equal(auth.get("redirect_uri"), `${s.url}/_signed-in`);
          assert.deepEqual(iss.codeExchanges(), { ok: 1, badVerifier: 0 });
          // the token lives in session storage and goes to the API as a bearer
          const token = await page.evaluate(() => sessionStorage.getItem("wharf.token"));
          assert.ok(token);
          assert.ok(apiAuth.includes(`Bearer ${token}`));
          assert.equal(await page.textContent("[data-user]"), "alice");
          await assertAccessible(page, "signed in");
          await screenshot(page, "signed-in-light");
          // what alice's policy refuses: the 403 message, not another sign-in
          await page.goto(`${s.url}/secret/app:v1`);
          await page.waitForSelector("[role=alert][data-status='403']");
          assert.match((await page.textContent("[role=alert]"))!, /not allowed/);
          assert.equal(authorizeUrls.length, 1);
          // the repositories listing shows only what alice may see
          await page.goto(`${s.url}/`);
          await page.waitForSelector("tr[data-repository]");
          assert.deepEqual(
            await page.$$eval(
              "tr[data-repository]",
              (t) => t.map((e) => e.getAttribute("data-repository")),
            ),
            ["team"],
          );
          // sign-out drops the token; the next 401 starts a new sign-in
          await page.click("button:has-text('Sign out')");
          assert.equal(await page.evaluate(() => sessionStorage.getItem("wharf.token")), null);
          await page.goto(`${s.url}/team/app:v1`);
          await page.waitForSelector("section[data-manifest]");
          assert.equal(authorizeUrls.length, 2);
          assert.deepEqual(iss.codeExchanges(), { ok: 2, badVerifier: 0 });

          // a callback whose state is not the one this tab sent is refused
          const fresh = await context.newPage();
          // The pending sign-in is planted before the callback's own scripts run: opening the
          // app first to plant it would meet a 401 and start a sign-in of its own, which can
          // land after the forged callback and replace it.
          await fresh.addInitScript(() =>
            sessionStorage.setItem(
              "wharf.signin",
              JSON.stringify({
                state: "sent-state",
                nonce: "n",
                verifier: "v",
                returnTo: "/",
                tokenEndpoint: "http://127.0.0.1:9/none",
              }),
            )
          );
          await fresh.goto(`${s.url}/_signed-in?code=abc&state=forged-state`);
          await fresh.waitForSelector("[role=alert]");
          assert.match((await fresh.textContent("[role=alert]"))!, /state does not match/);
          assert.equal(await fresh.evaluate(() => sessionStorage.getItem("wharf.token")), null);
          // an ID token whose nonce is not the request's is refused: the issuer is told to put
          // another nonce in (its claims override the request's)
          iss.setLoginClaims({ sub: "user-1", preferred_username: "alice", nonce: "not-yours" });
          const third = await context.newPage();
          await third.goto(`${s.url}/team/app:v1`);
          await third.waitForSelector("[role=alert]");
          assert.match((await third.textContent("[role=alert]"))!, /nonce does not match/);
          assert.equal(await third.evaluate(() => sessionStorage.getItem("wharf.token")), null);
        } finally {
          await browser.close();
        }
        // the issuer refuses a code exchange with the wrong verifier
        const a = await fetch(
          `${iss.issuer}/authorize?response_type=code&client_id=c&redirect_uri=${
            encodeURIComponent("http://x/cb")
          }&code_challenge=${"A".repeat(43)}&code_challenge_method=S256&state=s`,
          { redirect: "manual" },
        );
        const code = new URL(a.headers.get("location")!).searchParams.get("code")!;
        const t = await fetch(`${iss.issuer}/oauth/token`, {
          method: "POST",
          body: new URLSearchParams({
            grant_type: "authorization_code",
            code,
            client_id: "c",
            redirect_uri: "http://x/cb",
            code_verifier: "wrong",
          }),
        });
        assert.equal(t.status, 400);
        await t.body?.cancel();
        assert.equal(iss.codeExchanges().badVerifier, 1);
      });
    } finally {
      await iss.close();
    }
  },
});
