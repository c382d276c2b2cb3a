// The web UI at scale in chromium: 1,000 repositories and a namespace of 10,000 tagged manifests,
// timed from navigation until the list is on screen and a filter has applied (figures printed;
// the targets live in the issue, the bound asserted here only catches a view that hangs). Also
// the search and compare pages, over indexed layers.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { drainQueues, type TestServer, withServer } from "../helpers/server.ts";
import { jsonBytes, OCI_CONFIG, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { sha256 } from "../helpers/bytes.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

/** PUTs manifests with `width` requests in flight. */
async function putMany(
  s: TestServer,
  items: { ns: string; ref: string; body: Uint8Array }[],
  width = 16,
) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const { ns, ref, body } = items[next++];
      const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
        method: "PUT",
        headers: { "content-type": OCI_MANIFEST },
        body: body as BodyInit,
      });
      if (r.status !== 201) throw new Error(`${ns}:${ref}: ${r.status} ${await r.text()}`);
      await r.body?.cancel();
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
}

/** A distinct manifest whose blobs are not stored (the default config allows that). */
async function manifestBody(label: string): Promise<Uint8Array> {
  const cfg = jsonBytes({ label });
  return jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: await sha256(cfg), size: cfg.length },
    layers: [],
  });
}

const BOUND_MS = 15_000;

Deno.test({
  ...base,
  name: "ui in chromium: 1,000 repositories and 10,000 tags on screen, timed",
  fn: () =>
    withServer({ config: "[ui]\nenabled = true\n" }, async (s) => {
      const t0 = performance.now();
      const repos = [];
      for (let i = 0; i < 1000; i++) {
        repos.push({
          ns: `r${String(i).padStart(4, "0")}/app`,
          ref: "v1",
          body: await manifestBody(`r${i}`),
        });
      }
      const tags = [];
      for (let i = 0; i < 10_000; i++) {
        tags.push({
          ns: "big/app",
          ref: `t${String(i).padStart(5, "0")}`,
          body: await manifestBody(`t${i}`),
        });
      }
      await putMany(s, [...repos, ...tags]);
      console.log(`  seeded 11,000 manifests in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      // the timings below are the UI's, not the background jobs' the pushes caused
      await drainQueues(s.url);
      for (const path of ["/v2/_svc/repositories/list", "/v2/big/app/_svc/revisions/list"]) {
        const t1 = performance.now();
        const r = await req(s, path);
        const n = (await r.arrayBuffer()).byteLength;
        console.log(`  API ${path}: ${(performance.now() - t1).toFixed(0)} ms, ${n} bytes`);
      }
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/_search`); // the app loaded and cached once
        // 1,000 repositories
        let t = performance.now();
        await page.goto(`${s.url}/`);
        await page.waitForSelector("tr[data-repository=big]");
        const reposMs = performance.now() - t;
        assert.match((await page.textContent("[data-count]"))!, /1001 of 1001/);
        // a window of rows at a time; the filter covers all of them
        assert.equal(await page.locator("tr[data-repository]").count(), 200);
        await page.fill("main input[type=search]", "r0999");
        await page.waitForSelector("tr[data-repository=r0999]");
        assert.equal(await page.locator("tr[data-repository]").count(), 1);
        assert.ok(reposMs < BOUND_MS, `repositories took ${reposMs} ms`);
        await assertAccessible(page, "repositories");
        // 10,000 tags: on screen, then filtered and re-sorted over every entry
        t = performance.now();
        await page.goto(`${s.url}/big/app`);
        await page.waitForSelector("tr[data-digest]");
        const tagsMs = performance.now() - t;
        assert.match((await page.textContent("[data-count]"))!, /10000 of 10000/);
        t = performance.now();
        await page.fill("main input[type=search]", "t09999");
        await page.waitForSelector("text=1 of 10000");
        const filterMs = performance.now() - t;
        assert.deepEqual(
          await page.$$eval("tr[data-digest] td:first-child", (tds) =>
            tds.map((td) => td.textContent)),
          ["t09999"],
        );
        await page.fill("main input[type=search]", "");
        t = performance.now();
        await page.selectOption("main select", "tag");
        await page.waitForFunction(() =>
          document.querySelector("tr[data-digest] td")?.textContent === "t00000"
        );
        const sortMs = performance.now() - t;
        // a window of rows at a time; the rest on request
        assert.equal(await page.locator("tr[data-digest]").count(), 200);
        await page.click("button:has-text('Show 200 more')");
        assert.equal(await page.locator("tr[data-digest]").count(), 400);
        assert.ok(tagsMs < BOUND_MS, `10,000 tags took ${tagsMs} ms`);
        await assertAccessible(page, "manifests of a namespace");
        console.log(
          `  UI timings: 1,000 repositories ${reposMs.toFixed(0)} ms; 10,000 tags ${
            tagsMs.toFixed(0)
          } ms; filter ${filterMs.toFixed(0)} ms; sort ${sortMs.toFixed(0)} ms`,
        );
        // the bundle's weight as served, gzipped
        const html = await (await fetch(`${s.url}/`)).text();
        let gz = 0;
        for (const m of html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)) {
          const r = await fetch(`${s.url}${m[1]}`, { headers: { "accept-encoding": "gzip" } });
          const bytes = new Uint8Array(await r.arrayBuffer());
          const { gzipSync } = await import("node:zlib");
          gz += r.headers.get("content-encoding") === "gzip"
            ? bytes.length
            : gzipSync(bytes).length;
        }
        console.log(`  JS + CSS gzipped: ${(gz / 1024).toFixed(1)} KiB`);
        assert.ok(gz < 100 * 1024, `bundle ${gz} bytes gzipped`);
      } finally {
        await browser.close();
      }
    }),
});

Deno.test({
  ...base,
  name: "ui in chromium: search files across the registry, compare two images",
  fn: () =>
    withServer(
      { config: "[ui]\nenabled = true\n[global.job_queue]\npoll_interval_ms = 100\n" },
      async (s) => {
        const l1 = tarOf([
          { path: "etc", type: "5" },
          { path: "etc/app.conf", data: "mode=1\n" },
          { path: "usr/bin/tool", data: "v1 tool bytes" },
        ]);
        const l2 = tarOf([
          { path: "etc", type: "5" },
          { path: "etc/app.conf", data: "mode=2 and longer\n" },
          { path: "etc/new.txt", data: "new\n" },
        ]);
        await pushTarImage(s.url, "shop/web", "v1", [l1]);
        await pushTarImage(s.url, "shop/web", "v2", [l1, l2]);
        const browser = await launch();
        try {
          const page = await browser.newPage();
          // compare: 202 while the layers are indexed, then the diff
          await page.goto(`${s.url}/shop/web`);
          await page.click("a:has-text('Compare two images')");
          await page.fill("label:has-text('From') input", "v1");
          await page.fill("label:has-text('To') input", "v2");
          await page.click("button:has-text('Compare')");
          await page.waitForSelector("[data-section=diff]", { timeout: 60_000 });
          assert.equal(new URL(page.url()).search, "?from=v1&to=v2");
          assert.deepEqual(
            await page.$$eval("[data-section=added] code", (c) => c.map((e) => e.textContent)),
            ["etc/new.txt"],
          );
          assert.deepEqual(
            await page.$$eval("[data-section=modified] code", (c) => c.map((e) => e.textContent)),
            ["etc/app.conf"],
          );
          await assertAccessible(page, "compare");
          // search by name, then by path; results link to the file in the filesystem tab
          await page.goto(`${s.url}/_search`);
          await page.fill("main input[type=search]", "tool");
          await page.click("button:has-text('Search')");
          await page.waitForSelector("tr[data-result]");
          assert.equal(new URL(page.url()).search, "?name=tool");
          assert.equal(await page.locator("tr[data-result]").count(), 2, "v1 and v2 both hold it");
          const href = await page.getAttribute("tr[data-result] td:nth-child(3) a", "href");
          assert.match(href!, /^\/shop\/web@sha256:[0-9a-f]{64}#filesystem\/usr\/bin\/tool$/);
          await page.selectOption("main select", "path");
          await page.fill("main input[type=search]", "etc/new.txt");
          await page.click("button:has-text('Search')");
          await page.waitForSelector("tr[data-result]");
          assert.equal(await page.locator("tr[data-result]").count(), 1);
          await assertAccessible(page, "search");
          await screenshot(page, "search-light");
          await page.goto(`${s.url}/_search?name=nothing-has-this`);
          await page.waitForSelector("text=No indexed image holds such a file.");
        } finally {
          await browser.close();
        }
      },
    ),
});
