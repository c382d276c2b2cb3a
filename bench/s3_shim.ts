// An HTTP shim in front of s3rver adding the three multipart calls docker-registry's s3 driver
// needs and s3rver lacks: ListMultipartUploads (GET ?uploads), ListParts (GET ?uploadId) and
// AbortMultipartUpload (DELETE ?uploadId, answered 204; s3rver keeps the parts). It tracks the
// uploads and parts it sees go through. Everything else is forwarded as is. s3rver must accept
// signatures made for the shim's Host (startS3({ laxSignatures: true })). Both registries of
// bench/s3_bench.ts talk to S3 through it, so the comparison stays like for like.

interface Part {
  n: number;
  etag: string;
  size: number;
}
interface Upload {
  key: string;
  id: string;
  initiated: string;
  parts: Map<number, Part>;
}

const esc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

export function startS3Shim(target: string, bucket: string) {
  const uploads = new Map<string, Upload>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const u = new URL(req.url);
    const q = u.searchParams;
    // path style: /<bucket>/<key>
    const key = decodeURIComponent(u.pathname.slice(bucket.length + 2));
    if (req.method === "GET" && q.has("uploads")) {
      const prefix = q.get("prefix") ?? "";
      const list = [...uploads.values()].filter((x) => x.key.startsWith(prefix));
      const body = `<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult><Bucket>${bucket}</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><NextKeyMarker></NextKeyMarker><NextUploadIdMarker></NextUploadIdMarker><Prefix>${
        esc(prefix)
      }</Prefix><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${
        list.map((x) =>
          `<Upload><Key>${
            esc(x.key)
          }</Key><UploadId>${x.id}</UploadId><Initiated>${x.initiated}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`
        ).join("")
      }</ListMultipartUploadsResult>`;
      return new Response(body, { headers: { "content-type": "application/xml" } });
    }
    if (req.method === "GET" && q.has("uploadId")) {
      const up = uploads.get(q.get("uploadId")!);
      if (!up) return new Response("<Error><Code>NoSuchUpload</Code></Error>", { status: 404 });
      const parts = [...up.parts.values()].sort((a, b) => a.n - b.n);
      const body = `<?xml version="1.0" encoding="UTF-8"?>
<ListPartsResult><Bucket>${bucket}</Bucket><Key>${
        esc(up.key)
      }</Key><UploadId>${up.id}</UploadId><PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>${
        parts.at(-1)?.n ?? 0
      }</NextPartNumberMarker><MaxParts>1000</MaxParts><IsTruncated>false</IsTruncated>${
        parts.map((p) =>
          `<Part><PartNumber>${p.n}</PartNumber><LastModified>${up.initiated}</LastModified><ETag>${
            esc(p.etag)
          }</ETag><Size>${p.size}</Size></Part>`
        ).join("")
      }</ListPartsResult>`;
      return new Response(body, { headers: { "content-type": "application/xml" } });
    }
    if (req.method === "DELETE" && q.has("uploadId")) {
      uploads.delete(q.get("uploadId")!);
      await req.body?.cancel();
      return new Response(null, { status: 204 });
    }
    const res = await fetch(`${target}${u.pathname}${u.search}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      redirect: "manual",
    });
    if (req.method === "POST" && q.has("uploads") && res.ok) {
      const xml = await res.text();
      const id = /<UploadId>([^<]+)<\/UploadId>/.exec(xml)![1];
      uploads.set(id, { key, id, initiated: new Date().toISOString(), parts: new Map() });
      return new Response(xml, { status: res.status, headers: res.headers });
    }
    if (req.method === "PUT" && q.has("uploadId") && q.has("partNumber") && res.ok) {
      const up = uploads.get(q.get("uploadId")!);
      const n = Number(q.get("partNumber"));
      if (req.headers.has("x-amz-copy-source")) {
        const xml = await res.text();
        const etag = /<ETag>([^<]+)<\/ETag>/.exec(xml)?.[1]?.replace(/&quot;/g, '"') ?? "";
        const r = /bytes=(\d+)-(\d+)/.exec(req.headers.get("x-amz-copy-source-range") ?? "");
        up?.parts.set(n, { n, etag, size: r ? Number(r[2]) - Number(r[1]) + 1 : 0 });
        return new Response(xml, { status: res.status, headers: res.headers });
      }
      up?.parts.set(n, {
        n,
        etag: res.headers.get("etag") ?? "",
        size: Number(req.headers.get("content-length") ?? 0),
      });
      return res;
    }
    if (req.method === "POST" && q.has("uploadId") && res.ok) {
      uploads.delete(q.get("uploadId")!);
    }
    return res;
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
