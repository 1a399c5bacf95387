/** The Operator's rollout verdict (pure): done, still waiting, or failed with a clear message. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { rolloutVerdict } from "../../../provider/dynamic/index.js";
import type { KubeObject } from "../../../engine/kube/index.js";

const IMAGE = "registry.example.com/pulumi-cocoonset/controller:0.1.0";

function deployment(status: Record<string, unknown>, generation = 2): KubeObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "cocoonset-controller", namespace: "cocoonset-system", generation },
    spec: { replicas: 1 },
    status,
  };
}

function pod(
  waiting?: { reason: string; message?: string },
  name = "cocoonset-controller-abc",
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "cocoonset-system" },
    status: {
      phase: "Pending",
      containerStatuses: [
        {
          name: "controller",
          image: IMAGE,
          state: waiting ? { waiting } : { running: {} },
        },
      ],
    },
  };
}

const rolledOut = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 };

describe("rolloutVerdict", () => {
  it("is done once the current generation is observed, updated and available", () => {
    assert.deepEqual(rolloutVerdict(deployment(rolledOut), [pod()], IMAGE), { state: "done" });
  });

  it("waits for an unobserved generation, unavailable pods and old pods", () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...rolledOut, observedGeneration: 1 }, /has not seen the change/],
      [{ ...rolledOut, updatedReplicas: 0 }, /0\/1 pods updated/],
      [{ ...rolledOut, availableReplicas: 0 }, /0\/1 pods available/],
      [{ ...rolledOut, replicas: 2 }, /1 old pods still terminating/],
    ];
    for (const [status, why] of cases) {
      const v = rolloutVerdict(deployment(status), [pod()], IMAGE);
      assert.equal(v.state, "waiting", JSON.stringify(status));
      assert.match((v as { why: string }).why, why);
    }
  });

  it("fails at once on every image pull reason, naming the image, the pod and what to do", () => {
    for (const reason of [
      "ErrImagePull",
      "ImagePullBackOff",
      "InvalidImageName",
      "ErrImageNeverPull",
    ]) {
      const v = rolloutVerdict(
        deployment({ observedGeneration: 2, replicas: 1, updatedReplicas: 1 }),
        [pod({ reason, message: 'pull access denied for "x"' })],
        IMAGE,
      );
      assert.equal(v.state, "failed", reason);
      const m = (v as { message: string }).message;
      assert.match(m, /^\[image\] the cluster cannot pull the controller image /);
      assert.ok(m.includes(`"${IMAGE}"`), m);
      assert.ok(
        m.includes(
          `${reason} in pod cocoonset-system/cocoonset-controller-abc, container controller: pull access denied`,
        ),
        m,
      );
      assert.match(m, /cocoonset-dev image build --tag/);
      assert.match(m, /podman push/);
      assert.match(m, /imagePullSecrets/);
    }
  });

  it("fails on a container that cannot start, pointing at its logs", () => {
    const v = rolloutVerdict(deployment({}), [pod({ reason: "CrashLoopBackOff" })], IMAGE);
    assert.equal(v.state, "failed");
    assert.match(
      (v as { message: string }).message,
      /cannot start \(CrashLoopBackOff in pod .*\); see `kubectl logs -n cocoonset-system cocoonset-controller-abc`/,
    );
  });

  it("ignores terminating pods and benign waiting reasons, and fails on an exceeded progress deadline", () => {
    const gone = pod({ reason: "ErrImagePull" });
    gone.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    assert.equal(rolloutVerdict(deployment(rolledOut), [gone], IMAGE).state, "done");
    assert.equal(
      rolloutVerdict(deployment({}), [pod({ reason: "ContainerCreating" })], IMAGE).state,
      "waiting",
    );
    const v = rolloutVerdict(
      deployment({
        conditions: [
          {
            type: "Progressing",
            status: "False",
            reason: "ProgressDeadlineExceeded",
            message: 'ReplicaSet "x" has timed out progressing.',
          },
        ],
      }),
      [],
      IMAGE,
    );
    assert.deepEqual(v, {
      state: "failed",
      message:
        'the controller Deployment cocoonset-system/cocoonset-controller did not roll out: ReplicaSet "x" has timed out progressing.',
    });
  });
});
