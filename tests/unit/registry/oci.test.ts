// How the registry client reads a registry name (`host[:port][/prefix]`, as the operator's
// OCI_REGISTRY): the origin it speaks to and the repository of a VM.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OciRegistry, RegistryError, digestOf } from "../../../engine/registry/oci.js";

describe("OciRegistry names", () => {
  const table: [string, string, string, string][] = [
    ["127.0.0.1:5000", "http://127.0.0.1:5000", "", "vk-ns-cs-0"],
    ["localhost:5000/snapshots", "http://localhost:5000", "snapshots", "snapshots/vk-ns-cs-0"],
    [
      "registry.example.com/team/vms/",
      "https://registry.example.com",
      "team/vms",
      "team/vms/vk-ns-cs-0",
    ],
    ["http://localhost:5000", "http://localhost:5000", "", "vk-ns-cs-0"],
    ["https://127.0.0.1:5000/p", "https://127.0.0.1:5000", "p", "p/vk-ns-cs-0"],
  ];
  for (const [base, origin, prefix, repo] of table)
    it(`${base} → ${origin}, repository ${repo}`, () => {
      const r = new OciRegistry(base);
      assert.equal(r.origin, origin);
      assert.equal(r.prefix, prefix);
      assert.equal(r.repository("vk-ns-cs-0"), repo);
    });

  it("plainHttp overrides the loopback rule", () => {
    assert.equal(
      new OciRegistry("10.0.0.5:5000", { plainHttp: true }).origin,
      "http://10.0.0.5:5000",
    );
    assert.equal(
      new OciRegistry("127.0.0.1:5000", { plainHttp: false }).origin,
      "https://127.0.0.1:5000",
    );
  });

  it("a name without a host is refused", () => {
    assert.throws(
      () => new OciRegistry("/prefix"),
      (e) => RegistryError.isInstance(e),
    );
  });

  it("digestOf is the sha256 of the bytes", () => {
    assert.equal(
      digestOf(""),
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
  });
});
