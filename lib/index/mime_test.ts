// mime_type by SPEC rules 1–5, in order: ELF, PEM, extension, `#!` interpreter, text/plain, and
// the NUL test of the first 8 KiB (see mime.ts for how rule 5 combines with 3 and 4).
import assert from "node:assert/strict";
import { isText, mimeType } from "./mime.ts";

const enc = new TextEncoder();
const ELF = new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0]);
const PEM = enc.encode("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");

Deno.test("mime: rule 1 ELF wins over any name", () => {
  for (const p of ["usr/bin/ls", "x.txt", "lib/libc.so.6", "a.json"]) {
    assert.equal(mimeType(p, ELF), "application/x-executable", p);
  }
});

Deno.test("mime: rule 2 a file opening with a PEM block, whatever its name", () => {
  for (const p of ["etc/ssl/certs/ca.crt", "x.txt", "key", "bundle.json"]) {
    assert.equal(mimeType(p, PEM), "application/x-pem-file", p);
  }
  const key = enc.encode("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
  assert.equal(mimeType("k", key), "application/x-pem-file");
  // a PEM block later in the file does not make it a PEM file
  const later = enc.encode("# my certs\n-----BEGIN CERTIFICATE-----\nMIIB\n");
  assert.equal(mimeType("notes", later), "text/plain");
});

Deno.test("mime: rule 3 the extension (mime-db), then the #! interpreter", () => {
  const text = enc.encode("hello\n");
  assert.equal(mimeType("opt/app/config.json", text), "application/json");
  assert.equal(mimeType("index.HTML", text), "text/html");
  assert.equal(mimeType("style.css", text), "text/css");
  assert.equal(mimeType("a/b/app.py", text), "text/x-python");
  assert.equal(mimeType("run.sh", text), "application/x-sh");
  const sh = enc.encode("#!/bin/sh\necho hi\n");
  assert.equal(mimeType("usr/local/bin/hello", sh), mimeType("x.sh", sh));
  assert.equal(
    mimeType("bin/tool", enc.encode("#!/usr/bin/env python3\nprint(1)\n")),
    "text/x-python",
  );
  assert.equal(
    mimeType("bin/tool", enc.encode("#!/usr/bin/env -S node --max-old-space-size=64\n")),
    mimeType("x.js", text),
  );
  assert.equal(mimeType("bin/t", enc.encode("#!/bin/bash -e\n")), mimeType("x.sh", text));
  assert.equal(mimeType("bin/t", enc.encode("#!/usr/bin/perl -w\n")), mimeType("x.pl", text));
  // the extension comes before the interpreter
  assert.equal(mimeType("x.json", enc.encode("#!/bin/sh\n")), "application/json");
  // a leading dot names no extension
  assert.equal(mimeType("home/app/.profile", text), "text/plain");
  // an unknown interpreter falls through to text/plain
  assert.equal(mimeType("bin/t", enc.encode("#!/usr/bin/awk -f\n")), "text/plain");
});

Deno.test("mime: rule 4 text/plain, rule 5 a NUL in the first 8 KiB", () => {
  assert.equal(mimeType("etc/passwd", enc.encode("root:x:0:0\n")), "text/plain");
  assert.equal(mimeType("empty", new Uint8Array(0)), "text/plain");
  const binary = new Uint8Array([1, 2, 0, 3]);
  assert.equal(mimeType("data", binary), "application/octet-stream");
  // a textual type an extension names does not survive a NUL
  assert.equal(mimeType("notes.txt", binary), "application/octet-stream");
  assert.equal(
    mimeType("bin/t", new Uint8Array([0x23, 0x21, 0x2f, 0x62, 0, 0])),
    "application/octet-stream",
  );
  // a binary type an extension names stays (a .png always holds NULs)
  assert.equal(mimeType("logo.png", binary), "image/png");
  assert.equal(mimeType("a.gz", binary), "application/gzip");
  // only the first 8 KiB count
  const late = new Uint8Array(9000).fill(0x61);
  late[8500] = 0;
  assert.equal(isText(late), true);
  assert.equal(mimeType("log", late), "text/plain");
  const early = late.slice();
  early[8000] = 0;
  assert.equal(isText(early), false);
});
