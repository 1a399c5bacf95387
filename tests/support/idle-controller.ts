/**
 * Test support: an in-process controller that acts on a namespace's idle policies on a clock
 * the test moves, and the renewal of activity Leases at that clock's time, as a gateway would.
 * Used by the controller's idle tests and by the suspend-wake example's end-to-end test.
 */
import { markActivity } from "../../engine/execute/activity.js";
import { adminClient } from "./cluster.js";
import { startInProcessController, type InProcessController } from "./controller-in-process.js";
import type { Cleanup } from "./controller-process.js";
import { WarpClock } from "./fake-clock.js";
import { registryAddress } from "./lifecycle.js";

/** A controller on a warp clock, and the renewal of activity that it is sure to have seen. */
export interface IdleController {
  clock: WarpClock;
  proc: InProcessController;
  /**
   * Renews the activity Leases of `pods` (of the CocoonSet `fleet`) at the controller's time,
   * then waits until an idle step of the fleet has seen the renewals (its debug line) and its
   * reconcile has ended, so that moving the clock next can overtake neither the Lease watch
   * nor the requeue that reconcile asks for.
   */
  renew: (fleet: string, pods: string[]) => Promise<void>;
}

/** Starts the controller on `ns` with the embedded registry and a warp clock; synced. */
export async function startIdleController(c: Cleanup, ns: string): Promise<IdleController> {
  const client = adminClient();
  const clock = new WarpClock();
  const proc = await startInProcessController(c, {
    namespaces: [ns],
    clock,
    ociRegistry: registryAddress(),
  });
  await proc.synced();
  const renew = async (fleet: string, pods: string[]) => {
    const from = proc.lines.length;
    const at = new Date(clock.now()).toISOString();
    await markActivity(client, ns, fleet, pods, "test-gateway", new Date(at));
    const keys = pods.map((p) => p.slice(fleet.length + 1));
    const seen = await proc.waitForLog(
      `the idle step of ${ns}/${fleet} to see the renewal of ${pods.join(", ")}`,
      (l) =>
        l.msg === "idle step" &&
        l.namespace === ns &&
        l.name === fleet &&
        keys.every((k) => (l.renewals as Record<string, string> | undefined)?.[k] === at),
      { from },
    );
    // And the end of that reconcile: its requeue is timed on the clock as it stood then.
    await proc.waitForLog(
      `the end of the reconcile of ${ns}/${fleet} that saw the renewal`,
      (l) =>
        l.controller === "cocoonset" &&
        l.namespace === ns &&
        l.name === fleet &&
        (l.msg === "reconciled" || l.msg === "reconciled; requeue"),
      { from: proc.lines.indexOf(seen) + 1 },
    );
  };
  return { clock, proc, renew };
}
