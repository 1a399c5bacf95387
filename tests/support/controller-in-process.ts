/**
 * Test support: the controller in the test's own process, for tests where the process
 * boundary is not what is tested. It is what `cocoonset controller` runs (the same options,
 * reconcilers and runtime, on the shared cluster), with one difference a test may ask for: a
 * clock of its own for the work queue and the reconcilers, so a backoff is waited out by
 * moving the clock rather than by waiting.
 */
import assert from "node:assert/strict";
import {
  cocoonSetControllerDeps,
  controllerSockets,
  createLogger,
  reconcilerOptionsOf,
  resolveControllerOptions,
  runController,
  type Clock,
} from "../../controller/index.js";
import { KubeClient } from "../../engine/kube/index.js";
import { testKubeconfig } from "./cluster.js";
import { ControllerLog, type Cleanup, type Exit } from "./controller-process.js";
import type { WarpClock } from "./fake-clock.js";

/** A controller running in this process; `stop` is its SIGTERM. */
export class InProcessController extends ControllerLog {
  constructor(
    label: string,
    exited: Promise<Exit>,
    private readonly abort: AbortController,
  ) {
    super(label, exited);
  }

  /** Stops it as SIGTERM would and resolves once it has shut down (code 0). */
  stop(): Promise<Exit> {
    this.abort.abort();
    return this.exited;
  }
}

/** Options of {@link startInProcessController}. */
export interface InProcessOptions {
  /** `--namespace` values. */
  namespaces: string[];
  /** The clock of the work queue and the reconcilers. @default the system's */
  clock?: Clock;
  /** A name for messages. @default "in-process controller" */
  label?: string;
  /** `--oci-registry`: with it, `spec.suspend` and CocoonHibernations are acted on. */
  ociRegistry?: string;
  /** How long a stop lets in-flight reconciles finish before cutting them short. @default 30000 */
  shutdownGraceMs?: number;
}

/**
 * Starts the controller in this process on the shared cluster's admin kubeconfig, scoped to
 * the given namespaces, without leader election, with debug logs and metrics and probes on
 * free loopback ports. At cleanup a still-running controller is stopped and must stop
 * cleanly.
 */
export async function startInProcessController(
  cleanup: Cleanup,
  opts: InProcessOptions,
): Promise<InProcessController> {
  const label = opts.label ?? "in-process controller";
  const options = resolveControllerOptions(
    {
      kubeconfig: testKubeconfig(),
      namespace: opts.namespaces,
      leaderElect: false,
      metricsBindAddress: "127.0.0.1:0",
      healthProbeBindAddress: "127.0.0.1:0",
      logLevel: "debug",
      ...(opts.ociRegistry ? { ociRegistry: opts.ociRegistry } : {}),
    },
    {},
    undefined,
  );
  const client = new KubeClient({
    kubeconfig: options.kubeconfig,
    maxSockets: controllerSockets(options.namespaces.length),
  });
  const abort = new AbortController();
  let done!: (e: Exit) => void;
  const ctl = new InProcessController(
    label,
    new Promise<Exit>((resolve) => (done = resolve)),
    abort,
  );
  const clock = opts.clock;
  const deps = cocoonSetControllerDeps(client, {
    ...reconcilerOptionsOf(options),
    now: clock ? () => clock.now() : undefined,
  });
  const logger = createLogger({ level: "debug", destination: { write: (s) => ctl.feed(s) } });
  const grace = opts.shutdownGraceMs === undefined ? {} : { shutdownGraceMs: opts.shutdownGraceMs };
  runController(options, deps, { client, logger, signal: abort.signal, clock, ...grace }).then(
    () => done({ code: 0, signal: null }),
    (e: unknown) => {
      ctl.stderr += e instanceof Error ? (e.stack ?? e.message) : String(e);
      done({ code: 1, signal: null });
    },
  );
  cleanup.defer(`stop ${label}`, async () => {
    try {
      if (ctl.running) {
        const exit = await ctl.stop();
        assert.deepEqual(exit, { code: 0, signal: null }, `${label} stops cleanly\n${ctl.tail()}`);
      }
    } finally {
      client.close();
    }
  });
  return ctl;
}

/**
 * Follows the reconciles of the CocoonSet `ns/name` that `ctl` logs from line `from` on until
 * `done()` holds: after each one it looks, and when the reconcile asked to be requeued after
 * a while, `clock` moves by that much (so the requeue comes at once). Fails after `rounds`
 * such moves, or when no reconcile comes for a minute.
 */
export async function advancePastRequeues(
  ctl: ControllerLog,
  clock: WarpClock,
  key: { ns: string; name: string; from: number },
  what: string,
  done: () => Promise<boolean>,
  rounds = 10,
): Promise<void> {
  let from = key.from;
  let moves = 0;
  for (;;) {
    if (await done()) return;
    const line = await ctl.waitForLog(
      `a reconcile of ${key.ns}/${key.name} before ${what}`,
      (l) =>
        l.controller === "cocoonset" &&
        l.namespace === key.ns &&
        l.name === key.name &&
        (l.msg === "reconciled" || l.msg === "reconciled; requeue"),
      { from },
    );
    from = ctl.lines.indexOf(line) + 1;
    const wait = Number(line.requeueAfterMs ?? 0);
    if (wait <= 0) continue;
    if (++moves > rounds) assert.fail(`${what}: not after ${rounds} requeues\n${ctl.tail()}`);
    clock.advance(wait);
  }
}
