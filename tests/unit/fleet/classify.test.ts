import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseSlot } from "../../../engine/pods/classify.js";
import { classifyPods, isReady, isTerminal } from "../../../engine/pods/index.js";
import type { Pod } from "../../../engine/spec/index.js";
import { cocoonSet, mainPod, subPod, toolbox, toolboxPod, withAnnotations } from "./fixtures.js";

const cs = cocoonSet({ toolboxes: [toolbox("web")] }, { replicas: 3 });

function relabel(pod: Pod, slot: string): Pod {
  const out = structuredClone(pod);
  out.metadata = {
    ...out.metadata,
    name: `odd-${slot}`,
    labels: { ...out.metadata?.labels, "cocoonset.cocoonstack.io/slot": slot },
  };
  return out;
}

describe("classifyPods", () => {
  it("buckets owned pods into main, sub-agents by slot and toolboxes by name", () => {
    const main = mainPod(cs);
    const s1 = subPod(cs, 1);
    const s3 = subPod(cs, 3);
    const web = toolboxPod(cs, toolbox("web"));
    const out = classifyPods(cs, [s3, web, main, s1]);
    assert.equal(out.main, main);
    assert.deepEqual([...out.subAgents.keys()].sort(), [1, 3]);
    assert.equal(out.subAgents.get(3), s3);
    assert.deepEqual([...out.toolboxes.keys()], ["web"]);
  });

  it("keeps only pods whose controller ownerReference is this CocoonSet's uid", () => {
    const foreign = subPod(cs, 1);
    foreign.metadata!.ownerReferences = [
      { ...foreign.metadata!.ownerReferences![0], uid: "other" },
    ];
    const notController = subPod(cs, 2);
    notController.metadata!.ownerReferences = [
      { ...notController.metadata!.ownerReferences![0], controller: false },
    ];
    const orphan = subPod(cs, 3);
    delete orphan.metadata!.ownerReferences;
    const out = classifyPods(cs, [foreign, notController, orphan]);
    assert.equal(out.subAgents.size, 0);
  });

  it("ignores a pod that is owned but carries another CocoonSet's name label", () => {
    const pod = subPod(cs, 1);
    pod.metadata!.labels!["cocoonset.cocoonstack.io/name"] = "other";
    assert.equal(classifyPods(cs, [pod]).subAgents.size, 0);
  });

  it("skips pods that are already terminating", () => {
    const main = mainPod(cs);
    main.metadata!.deletionTimestamp = "2025-06-01T11:59:00Z";
    assert.equal(classifyPods(cs, [main]).main, undefined);
  });

  it("ignores sub-agents whose slot label does not parse as a positive integer", () => {
    const base = subPod(cs, 1);
    const odd = ["x", "", "-1", "0", "1.5", "01", " 2"].map((slot) => relabel(base, slot));
    assert.equal(classifyPods(cs, odd).subAgents.size, 0);
  });

  it("ignores pods with an unknown role", () => {
    const pod = subPod(cs, 1);
    pod.metadata!.labels!["cocoonset.cocoonstack.io/role"] = "sidecar";
    const out = classifyPods(cs, [pod]);
    assert.equal(out.subAgents.size + out.toolboxes.size, 0);
    assert.equal(out.main, undefined);
  });
});

describe("parseSlot", () => {
  it("accepts canonical positive decimals only", () => {
    assert.equal(parseSlot("12"), 12);
    assert.equal(parseSlot("0"), undefined);
    assert.equal(parseSlot("+3"), undefined);
    assert.equal(parseSlot(undefined), undefined);
    assert.equal(parseSlot("99999999999999999999"), undefined);
  });
});

describe("pod state", () => {
  it("is terminal when the phase is Failed", () => {
    const pod = mainPod(cs);
    pod.status = { phase: "Failed" };
    assert.equal(isTerminal(pod), true);
  });

  it("is terminal when the VM lifecycle state is failed, whatever the phase", () => {
    const pod = withAnnotations(mainPod(cs), { "vm.cocoonstack.io/lifecycle-state": "failed" });
    assert.equal(pod.status?.phase, "Running");
    assert.equal(isTerminal(pod), true);
  });

  it("is not terminal when Running, Pending or Succeeded with no failed lifecycle", () => {
    for (const phase of ["Running", "Pending", "Succeeded", "Unknown"]) {
      const pod = withAnnotations(mainPod(cs), { "vm.cocoonstack.io/lifecycle-state": "running" });
      pod.status = { phase };
      assert.equal(isTerminal(pod), false, phase);
    }
  });

  it("is ready only with a Ready condition whose status is True", () => {
    assert.equal(isReady(mainPod(cs)), true);
    assert.equal(isReady(mainPod(cs, false)), false);
    assert.equal(
      isReady({ status: { conditions: [{ type: "ContainersReady", status: "True" }] } }),
      false,
    );
    assert.equal(isReady({}), false);
  });
});
