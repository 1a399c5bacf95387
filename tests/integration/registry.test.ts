/**
 * The embedded cluster's OCI registry, through the distribution API a snapshot feature
 * would use: push a small image (a layer blob, a config blob, a manifest under two tags),
 * read it back by tag and digest, list the tags, delete a tag and the manifest.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { test } from "node:test";
import { readState } from "../../cluster/local-cluster.js";
import { testClusterDir } from "../support/cluster.js";

const MANIFEST = "application/vnd.oci.image.manifest.v1+json";

function digestOf(b: Buffer | string): string {
  return `sha256:${createHash("sha256").update(b).digest("hex")}`;
}

/** The running shared cluster's registry, as `http://127.0.0.1:<port>`. */
function registryUrl(): string {
  const st = readState(testClusterDir());
  assert.ok(st?.registry, `the cluster in ${testClusterDir()} records its registry`);
  assert.match(st.registry, /^127\.0\.0\.1:\d+$/, "loopback only");
  return `http://${st.registry}`;
}

/** Uploads a blob the two-step way (POST a session, PUT the bytes with their digest). */
async function pushBlob(base: string, repo: string, body: Buffer): Promise<string> {
  const digest = digestOf(body);
  const start = await fetch(`${base}/v2/${repo}/blobs/uploads/`, { method: "POST" });
  assert.equal(start.status, 202, await start.text());
  const location = start.headers.get("location");
  assert.ok(location, "the upload session has a Location");
  const url = new URL(location, base);
  url.searchParams.set("digest", digest);
  const put = await fetch(url, {
    method: "PUT",
    headers: { "content-type": "application/octet-stream" },
    body,
  });
  assert.equal(put.status, 201, await put.text());
  assert.equal(put.headers.get("docker-content-digest"), digest);
  return digest;
}

async function tags(base: string, repo: string): Promise<string[]> {
  const r = await fetch(`${base}/v2/${repo}/tags/list`);
  assert.equal(r.status, 200);
  const body = (await r.json()) as { name: string; tags: string[] | null };
  assert.equal(body.name, repo);
  return body.tags ?? [];
}

test("an image pushed to the cluster's registry is listed, read back, and deleted by tag and digest", async () => {
  const base = registryUrl();
  const v2 = await fetch(`${base}/v2/`);
  assert.equal(v2.status, 200, "the registry answers the API version check");
  await v2.text();

  const repo = `cocoonset-test/fixture-${randomBytes(3).toString("hex")}`;
  const layer = Buffer.from(`a layer of ${repo}\n`);
  const config = Buffer.from(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      rootfs: { type: "layers", diff_ids: [digestOf(layer)] },
    }),
  );
  const layerDigest = await pushBlob(base, repo, layer);
  const configDigest = await pushBlob(base, repo, config);

  const head = await fetch(`${base}/v2/${repo}/blobs/${layerDigest}`, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("content-length"), String(layer.length));
  const blob = await fetch(`${base}/v2/${repo}/blobs/${configDigest}`);
  assert.deepEqual(Buffer.from(await blob.arrayBuffer()), config);

  // A blob whose bytes do not match the digest it claims is refused.
  const bad = await fetch(`${base}/v2/${repo}/blobs/uploads/?digest=${digestOf("other bytes")}`, {
    method: "POST",
    body: "these bytes",
  });
  assert.equal(bad.status, 400);
  assert.match(await bad.text(), /DIGEST_INVALID/);

  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: configDigest,
      size: config.length,
    },
    layers: [
      {
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: layerDigest,
        size: layer.length,
      },
    ],
  });
  const manifestDigest = digestOf(manifest);
  for (const tag of ["v1", "v2"]) {
    const put = await fetch(`${base}/v2/${repo}/manifests/${tag}`, {
      method: "PUT",
      headers: { "content-type": MANIFEST },
      body: manifest,
    });
    assert.equal(put.status, 201, await put.text());
    assert.equal(put.headers.get("docker-content-digest"), manifestDigest);
  }
  assert.deepEqual(await tags(base, repo), ["v1", "v2"]);

  const byDigest = await fetch(`${base}/v2/${repo}/manifests/${manifestDigest}`, {
    headers: { accept: MANIFEST },
  });
  assert.equal(byDigest.status, 200);
  assert.equal(byDigest.headers.get("content-type"), MANIFEST);
  assert.equal(await byDigest.text(), manifest);

  // Deleting a tag leaves the other tag and the manifest by digest.
  const delTag = await fetch(`${base}/v2/${repo}/manifests/v1`, { method: "DELETE" });
  assert.equal(delTag.status, 202, await delTag.text());
  assert.deepEqual(await tags(base, repo), ["v2"]);
  const gone = await fetch(`${base}/v2/${repo}/manifests/v1`);
  assert.equal(gone.status, 404);
  assert.match(await gone.text(), /MANIFEST_UNKNOWN/);
  assert.equal((await fetch(`${base}/v2/${repo}/manifests/v2`, { method: "HEAD" })).status, 200);

  // Deleting the manifest by digest: it is no longer served by digest.
  const delManifest = await fetch(`${base}/v2/${repo}/manifests/${manifestDigest}`, {
    method: "DELETE",
  });
  assert.equal(delManifest.status, 202, await delManifest.text());
  const after = await fetch(`${base}/v2/${repo}/manifests/${manifestDigest}`);
  assert.equal(after.status, 404);
  await after.body?.cancel();
});
