/**
 * Test support for the e2e tests of the fleet program (tests/e2e/programs/fleet): its
 * stack's Slots step in a preview, and the fleet's pods as the cluster has them.
 */
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import assert from "node:assert/strict";
import { join } from "node:path";
import { LABELS } from "../../engine/spec/index.js";
import { paths, waitForList, type KubeObject } from "../../engine/kube/index.js";
import { adminClient } from "./cluster.js";
import { repoRoot } from "./pulumi.js";

/** The program: a Fleet, and with `withOperator` an Operator, from stack config. */
export const fleetProgram = join(repoRoot, "tests", "e2e", "programs", "fleet");
export const SLOTS_TYPE = "pulumi-nodejs:dynamic/cocoonset:Slots";

/** Runs the steps; when one fails, destroys the stack before the failure is reported. */
export async function destroyOnFailure(stack: Stack, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } catch (e) {
    await stack.destroy().catch(() => undefined);
    throw e;
  }
}

/** The Slots resource's step in a preview: its operation and detailed-diff keys. */
export interface SlotsStep {
  op: string;
  keys: string[];
  kinds: Record<string, string>;
}

/** Previews with `--diff` and returns the Slots step plus the change summary. */
export async function previewSlots(
  stack: Stack,
  opts: { refresh?: boolean } = {},
): Promise<{ step: SlotsStep | undefined; changes: Record<string, number> }> {
  let step: SlotsStep | undefined;
  const result = await stack.preview({
    diff: true,
    refresh: opts.refresh,
    onEvent: (e: EngineEvent) => {
      const md = e.resourcePreEvent?.metadata;
      if (md?.type !== SLOTS_TYPE) return;
      const detailed = md.detailedDiff ?? {};
      step = {
        op: md.op,
        keys: Object.keys(detailed).sort(),
        kinds: Object.fromEntries(Object.entries(detailed).map(([k, v]) => [k, v.diffKind])),
      };
    },
  });
  return { step, changes: result.changeSummary };
}

/** The slot keys (slot numbers) whose whole entry a diff adds or deletes. */
export function wholeSlotKeys(step: SlotsStep, kind: "add" | "delete"): number[] {
  return step.keys
    .filter((k) => /^slots\.\d+$/.test(k) && step.kinds[k] === kind)
    .map((k) => Number(k.slice("slots.".length)))
    .sort((a, b) => a - b);
}

export const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Non-terminating pods of a fleet, by name. */
export async function fleetPods(ns: string, name: string): Promise<KubeObject[]> {
  const list = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return list.items
    .filter((p) => !p.metadata.deletionTimestamp)
    .sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
}

/** Waits until the fleet's live pods are exactly `<name>-<slot>` for the given slots and toolboxes. */
export async function expectSlots(
  ns: string,
  name: string,
  slots: number[],
  toolboxes: string[] = [],
): Promise<KubeObject[]> {
  const want = [...slots, ...toolboxes].map((s) => `${name}-${s}`).sort();
  const names = (items: KubeObject[]) =>
    items
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => p.metadata.name)
      .sort();
  await waitForList(
    adminClient(),
    paths.pods(ns),
    (items) => JSON.stringify(names(items)) === JSON.stringify(want),
    {
      labelSelector: `${LABELS.name}=${name}`,
      timeoutMs: 30_000,
      description: `pods of ${ns}/${name} to be slots ${slots.join(",")}`,
    },
  );
  const pods = await fleetPods(ns, name);
  assert.deepEqual(
    pods.map((p) => p.metadata.name),
    want,
  );
  return pods;
}

/** uid of each pod of the fleet, by pod name. */
export async function podUids(ns: string, name: string): Promise<Record<string, string>> {
  const pods = await adminClient().list(paths.pods(ns), {
    labelSelector: `${LABELS.name}=${name}`,
  });
  return Object.fromEntries(
    pods.items.map((p): [string, string] => [p.metadata.name ?? "", p.metadata.uid ?? ""]),
  );
}

/** Runs the steps; whatever happens, destroys the stacks after. */
export async function withStacks(stacks: Stack[], steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } finally {
    for (const s of stacks.reverse()) await s.destroy().catch(() => undefined);
  }
}
