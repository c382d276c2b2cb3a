// Deno 2.9's node:crypto verify() throws "no default digest" for an EC or RSA key when it is
// given no digest, where Node uses SHA-256 (OpenSSL's default for those keys). @sigstore/core
// verifies Rekor's signed entry timestamps that way, so without this every log entry would read
// as failing. The shim changes only that case (a null digest with an EC or RSA key), so every
// call that worked before behaves as before.
import crypto from "node:crypto";

const MARK = Symbol.for("wharf.signatures.verifyDefaultDigest");
type Verify = typeof crypto.verify;
const holder = crypto as unknown as Record<string | symbol, unknown>;

if (!holder[MARK]) {
  const original = crypto.verify as Verify;
  const shim = function (
    algorithm: string | null | undefined,
    data: NodeJS.ArrayBufferView,
    key: Parameters<Verify>[2],
    signature: NodeJS.ArrayBufferView,
    callback?: (error: Error | null, result: boolean) => void,
  ) {
    if (algorithm == null) {
      const type = key instanceof crypto.KeyObject ? key.asymmetricKeyType : undefined;
      if (type === "ec" || type === "rsa") algorithm = "sha256";
    }
    return callback
      ? original(algorithm, data, key, signature, callback)
      : original(algorithm, data, key, signature);
  };
  holder.verify = shim;
  holder[MARK] = true;
}
