import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parse } from "yaml";
import {
  buildCrd,
  renderCrdJson,
  renderCrdYaml,
  repositoryRoot,
  staleGeneratedFiles,
} from "../../../scripts/generate-schema.js";
import { cocoonSetCrd } from "../../../engine/spec/index.js";

describe("generated files", () => {
  it("are up to date with the schema source (run dist/scripts/generate-schema.js when this fails)", async () => {
    assert.deepEqual(await staleGeneratedFiles(repositoryRoot()), []);
  });

  it("say the same thing in YAML, in JSON and in what the runtime imports", () => {
    assert.deepEqual(parse(renderCrdYaml()), buildCrd());
    assert.deepEqual(JSON.parse(renderCrdJson()), buildCrd());
    assert.deepEqual(cocoonSetCrd, buildCrd());
  });

  it("declare the CocoonSet resource as SPEC section 1 names it", () => {
    const crd = buildCrd() as {
      metadata: { name: string };
      spec: {
        group: string;
        scope: string;
        names: Record<string, unknown>;
        versions: {
          name: string;
          served: boolean;
          storage: boolean;
          subresources: unknown;
          additionalPrinterColumns: { name: string; jsonPath: string }[];
        }[];
      };
    };
    assert.equal(crd.metadata.name, "cocoonsets.cocoonset.cocoonstack.io");
    assert.equal(crd.spec.group, "cocoonset.cocoonstack.io");
    assert.equal(crd.spec.scope, "Namespaced");
    assert.deepEqual(crd.spec.names, {
      kind: "CocoonSet",
      listKind: "CocoonSetList",
      plural: "cocoonsets",
      singular: "cocoonset",
      shortNames: ["cs"],
      categories: ["cocoon"],
    });
    const [v1] = crd.spec.versions;
    assert.deepEqual(
      [v1.name, v1.served, v1.storage, v1.subresources],
      ["v1", true, true, { status: {} }],
    );
    assert.deepEqual(
      v1.additionalPrinterColumns.map((c) => [c.name, c.jsonPath]),
      [
        ["Phase", ".status.phase"],
        ["Ready", ".status.readyAgents"],
        ["Desired", ".status.desiredAgents"],
        ["Age", ".metadata.creationTimestamp"],
      ],
    );
  });
});
