// Runs the S3-compatible test server (@20minutes/s3rver) on 127.0.0.1 and prints its port.
// Usage: s3rver_main.ts <data dir> <port|0> <bucket> [lax]
// `lax` accepts signatures made for another Host (bench/s3_shim.ts forwards requests to it).
import S3rver from "s3rver";

const [directory, port, bucket, mode] = Deno.args;
const server = new S3rver({
  address: "127.0.0.1",
  port: Number(port ?? 0),
  directory,
  silent: true,
  configureBuckets: [{ name: bucket ?? "wharf" }],
  // virtual-host buckets need DNS names; clients use path-style on loopback
  vhostBuckets: false,
  allowMismatchedSignatures: mode === "lax",
});
const addr = await server.run();
console.log(`s3rver listening on http://127.0.0.1:${addr.port}`);
