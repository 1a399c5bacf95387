/**
 * Carrying out the idle step (engine/idle/step.ts) for one fleet: the status record first
 * (conditioned on the CocoonSet as read, so a view another writer overtook writes nothing),
 * then the policy's CocoonHibernations as the record says, the events, and an expired
 * fleet's deletion (its finalizer releases the tree as any deletion's does).
 * Behaviour: docs/lifecycle-design.md, "Idle policy, expiry and hooks".
 */
import {
  isAlreadyExists,
  isConflict,
  isNotFound,
  paths,
  PatchType,
  type KubeClient,
} from "../kube/index.js";
import {
  idleHibernationLabels,
  planIdleStep,
  type IdleHibernationWrite,
  type IdleStep,
  type IdleStepInput,
} from "../idle/index.js";
import { HIBERNATION_API_VERSION, HIBERNATION_KIND } from "../spec/hibernation-schema.js";
import { API_VERSION, KIND } from "../spec/constants.js";
import type { CocoonSet } from "../spec/index.js";
import type { EngineHooks } from "./pass-options.js";
import { beforeTransition, HookHeld } from "./hook-gate.js";

/** How one idle step ended. */
export interface IdleStepResult {
  /** The CocoonSet after the step's status write (the one read when it wrote none). */
  cocoonSet: CocoonSet;
  step: IdleStep;
  /** The status write met a newer CocoonSet (409): nothing was done; plan again from it. */
  overtaken?: boolean;
  /** The CocoonSet was deleted (an expiry with `action: delete`). */
  deleted?: boolean;
}

/** Creates, turns or deletes one of the idle policy's CocoonHibernations. */
async function writeHibernation(
  client: KubeClient,
  cs: CocoonSet,
  h: IdleHibernationWrite,
  hooks: EngineHooks,
): Promise<void> {
  const ns = cs.metadata.namespace ?? "";
  const name = cs.metadata.name ?? "";
  if (h.op === "delete") {
    try {
      await client.delete(paths.cocoonHibernation(ns, h.name));
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  } else if (h.op === "patch") {
    await client.patch(
      paths.cocoonHibernation(ns, h.name),
      { spec: { desire: h.desire } },
      PatchType.merge,
    );
  } else {
    try {
      await client.create(paths.cocoonHibernations(ns), {
        apiVersion: HIBERNATION_API_VERSION,
        kind: HIBERNATION_KIND,
        metadata: {
          name: h.name,
          namespace: ns,
          labels: idleHibernationLabels(cs),
          ownerReferences: [
            {
              apiVersion: API_VERSION,
              kind: KIND,
              name,
              uid: cs.metadata.uid ?? "",
              controller: true,
            },
          ],
        },
        spec: { podRef: { name: h.pod }, desire: h.desire },
      });
    } catch (e) {
      // Created by an earlier pass the cache has not shown yet: the next pass turns it.
      if (!isAlreadyExists(e)) throw e;
    }
  }
  hooks.log?.("info", "wrote the idle policy's CocoonHibernation", {
    hibernation: h.name,
    pod: h.pod,
    op: h.op,
    desire: h.desire,
  });
}

/** Runs the idle step of `input.cocoonSet`: decides (pure), then writes what it decided. */
export async function runIdleStep(
  client: KubeClient,
  input: IdleStepInput,
  hooks: EngineHooks = {},
): Promise<IdleStepResult> {
  let cs = input.cocoonSet;
  const step = planIdleStep(input);
  const ns = cs.metadata.namespace ?? "";
  const name = cs.metadata.name ?? "";
  if (step.expiring) {
    // spec.hooks before the expiry is written; the same expiry time gives every call (a retry,
    // a controller restarted in between) the same id. Held under Fail: retried with backoff.
    const gate = await beforeTransition(cs, "BeforeExpire", "expiry", new Date(step.expiring), {
      event: (type, reason, message) => hooks.event?.(cs, type, reason, message),
      log: (level, msg, fields) => hooks.log?.(level, msg, fields),
    });
    if (!gate.go) throw new HookHeld(gate.message ?? "the lifecycle hook failed");
  }
  if (step.status) {
    try {
      cs = await client.patch<CocoonSet>(
        paths.cocoonSetStatus(ns, name),
        { metadata: { resourceVersion: cs.metadata.resourceVersion }, status: step.status },
        PatchType.merge,
      );
    } catch (e) {
      if (isConflict(e)) return { cocoonSet: cs, step, overtaken: true };
      throw e;
    }
    hooks.log?.("info", "wrote the idle policy's record", { status: step.status });
  }
  for (const h of step.hibernations) await writeHibernation(client, cs, h, hooks);
  for (const e of step.events) hooks.event?.(cs, e.type, e.reason, e.message);
  if (step.deleteFleet) {
    try {
      await client.delete(paths.cocoonSet(ns, name), {
        uid: cs.metadata.uid,
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    hooks.log?.("info", "deleted the expired CocoonSet", {});
    return { cocoonSet: cs, step, deleted: true };
  }
  return { cocoonSet: cs, step };
}
