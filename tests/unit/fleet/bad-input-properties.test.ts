// The bad-input property: whatever a program or a file hands over (valid, near-valid or
// hostile), `check` either passes it or refuses it with failures that each name a field; it
// never throws, and it answers within 50 ms of CPU time. The integration tier sends a sample of the same
// generator to the apiserver and checks that both agree (tests/integration/bad-input.test.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { resolveControllerOptions } from "../../../controller/options.js";
import { UNKNOWN, check } from "../../../provider/dynamic/slots.js";
import { validateCocoonSetSpec } from "../../../engine/spec/index.js";
import { operatorArgumentProblems } from "../../../sdk/operator-args.js";
import type { OperatorArgs } from "../../../sdk/operator.js";
import { fleetInputsArb, namesAField, operatorArgsArb, specArb } from "../../support/bad-input.js";

const BUDGET_MS = 50;

/** This process's CPU time so far, in milliseconds (user and system). */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * Runs `fn` and returns its result with the CPU time it took: the process's own, which other
 * processes on a loaded machine do not add to as they add to the wall clock. A run past the
 * budget is measured once more, so a garbage-collection pause is not mistaken for an input
 * that is slow to check (those take the same long time on every run).
 */
async function timed<T>(fn: () => T | Promise<T>): Promise<{ value: T; ms: number }> {
  let start = cpuMs();
  let value = await fn();
  let ms = cpuMs() - start;
  if (ms > BUDGET_MS) {
    start = cpuMs();
    value = await fn();
    ms = cpuMs() - start;
  }
  return { value, ms };
}

function fleetCheckInputs(inputs: Record<string, unknown>): Record<string, unknown> {
  return {
    kubeconfig: "apiVersion: v1\nkind: Config\n",
    uid: UNKNOWN,
    slots: {},
    providerVersion: "test",
    ...inputs,
  };
}

describe("bad input never throws, is refused naming a field, within 50 ms", () => {
  it("the slots resource's check, on arbitrary Fleet inputs", async () => {
    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(fleetInputsArb, async (inputs) => {
        const { value, ms } = await timed(() => check({}, fleetCheckInputs(inputs)));
        assert.ok(ms <= BUDGET_MS, `check took ${ms.toFixed(1)} ms`);
        for (const f of value.failures) {
          assert.ok(namesAField(f.reason), `names no field: ${f.reason}`);
        }
        if (value.failures.length === 0) {
          accepted++;
          assert.equal(validateCocoonSetSpec(inputs.spec).ok, true);
        } else {
          refused++;
        }
      }),
      { numRuns: 600 },
    );
    // The generator must exercise both sides, or the property says little.
    assert.ok(accepted > 30 && refused > 30, `accepted ${accepted}, refused ${refused}`);
  });

  it("the validator, on arbitrary specs", async () => {
    await fc.assert(
      fc.asyncProperty(specArb, async (spec) => {
        const { value, ms } = await timed(() => validateCocoonSetSpec(spec));
        assert.ok(ms <= BUDGET_MS, `validate took ${ms.toFixed(1)} ms`);
        if (!value.ok) {
          assert.ok(value.failures.length > 0);
          for (const f of value.failures) assert.ok(f.property !== "" && f.reason !== "");
        }
      }),
      { numRuns: 600 },
    );
  });

  it("huge strings in every string field", async () => {
    const huge = "a".repeat(1 << 20);
    const spec = {
      nodePool: huge,
      nodeName: huge,
      snapshotCompatibilityClass: huge,
      agent: { image: huge, network: huge, serviceAccountName: huge, storage: huge },
      toolboxes: [{ name: huge, image: huge, staticIP: huge }],
    };
    const { value, ms } = await timed(() =>
      check({}, fleetCheckInputs({ name: huge, namespace: huge, spec })),
    );
    assert.ok(ms <= BUDGET_MS * 4, `check of 1 MiB strings took ${ms.toFixed(1)} ms`);
    const fields = value.failures.map((f) => /^\[(\S+)\] /.exec(f.reason)?.[1]);
    for (const field of [
      "name",
      "namespace",
      "spec.nodePool",
      "spec.nodeName",
      "spec.snapshotCompatibilityClass",
      "spec.agent.storage",
      "spec.agent.serviceAccountName",
      "spec.toolboxes[0].name",
    ]) {
      assert.ok(fields.includes(field), `${field} refused: ${fields.join(", ")}`);
    }
  });

  it("Operator arguments: refused naming a field, or accepted by the controller too", async () => {
    await fc.assert(
      fc.asyncProperty(operatorArgsArb, async (args) => {
        const { value: problems, ms } = await timed(() =>
          operatorArgumentProblems(args as OperatorArgs),
        );
        assert.ok(ms <= BUDGET_MS, `took ${ms.toFixed(1)} ms`);
        for (const p of problems) assert.ok(namesAField(p), `names no field: ${p}`);
        if (problems.length > 0) return;
        // Accepted: the flags the Operator renders must start the controller.
        const a = args as OperatorArgs;
        assert.doesNotThrow(() =>
          resolveControllerOptions(
            {
              concurrency: String(a.concurrency ?? 4),
              fanoutConcurrency: String(a.fanoutConcurrency ?? 8),
              reapInterval: a.reapInterval ?? "5m",
              logLevel: a.logLevel ?? "info",
              namespace: a.watchNamespaces ?? [],
              leaderElect: String(a.leaderElect ?? true),
              hibernateTimeout: a.hibernateTimeout?.trim(),
              wakeTimeout: a.wakeTimeout?.trim(),
            },
            {},
            a.namespace ?? "cocoonset-system",
          ),
        );
      }),
      { numRuns: 600 },
    );
  });
});
