/**
 * The orphan reaper: one pass over a namespace deletes expired ephemeral
 * Jobs, pods and prompt ConfigMaps. Decisions are pure (see decisions.ts); this file lists
 * and deletes.
 * Behaviour: docs/behaviour.md §5.
 */
import { isForbidden, paths, type KubeClient, type KubeObject } from "../kube/index.js";
import {
  COMPONENT_LABEL,
  configMapReapReason,
  jobReapReason,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  podReapReason,
  PROMPT_DATA_COMPONENT,
  type ReapReason,
} from "./decisions.js";
import type { ReleaseLog } from "./release.js";
import { errorMessage } from "../kube/branded-error.js";

/** Kinds the reaper deletes, as metric labels. */
export type ReapKind = "job" | "pod" | "configmap";

/** Metric hook: feeds `cocoonset_reap_deleted_total{kind,reason}`. */
export interface ReapMetrics {
  reapDeleted(kind: ReapKind, reason: string): void;
}

/** Options of {@link reapNamespace}. */
export interface ReapOptions {
  /** Clock. @default () => new Date() */
  now?: () => Date;
  /** Structured logs. */
  log?: ReleaseLog;
  /** Metrics. */
  metrics?: ReapMetrics;
}

/** Objects deleted by one pass, by kind. */
export interface ReapResult {
  jobs: number;
  pods: number;
  configMaps: number;
}

const MANAGED = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/**
 * Runs one reaper pass over `namespace`.
 *
 * Guarantees: every list happens before any delete, so a pass that fails on listing pods or
 * ConfigMaps deletes nothing; deletes carry a uid precondition, so a same-name replacement
 * is never reaped; a failed delete is logged and not counted; a 403 on listing Jobs is a
 * warning and the pass goes on without them.
 */
export async function reapNamespace(
  client: KubeClient,
  namespace: string,
  opts: ReapOptions = {},
): Promise<ReapResult> {
  const log = opts.log ?? (() => undefined);
  const nowMs = (opts.now ?? (() => new Date()))().getTime();
  const ns = namespace;
  const [jobs, pods, configMaps] = await Promise.all([
    client.list(paths.jobs(ns), { labelSelector: MANAGED }).then(
      (l) => l.items,
      (e: unknown) => {
        if (!isForbidden(e)) throw e;
        log("warn", "not allowed to list Jobs: reaping without them", {
          namespace: ns,
          error: errorMessage(e),
        });
        return [];
      },
    ),
    client.list(paths.pods(ns), { labelSelector: MANAGED }).then((l) => l.items),
    client
      .list(paths.configMaps(ns), {
        labelSelector: `${MANAGED},${COMPONENT_LABEL}=${PROMPT_DATA_COMPONENT}`,
      })
      .then((l) => l.items),
  ]);

  const reapKind = async (
    kind: ReapKind,
    items: KubeObject[],
    decide: (o: KubeObject, nowMs: number) => ReapReason | undefined,
    path: (name: string) => string,
  ): Promise<number> => {
    let n = 0;
    for (const o of items) {
      const reason = decide(o, nowMs);
      if (!reason) continue;
      const name = o.metadata.name ?? "";
      try {
        const deleted = await client.delete(path(name), {
          uid: o.metadata.uid,
          propagationPolicy: kind === "job" ? "Background" : undefined,
        });
        if (!deleted) continue;
        n++;
        opts.metrics?.reapDeleted(kind, reason);
        log("info", `reaped ${kind}`, { namespace: ns, name, reason });
      } catch (e) {
        log("warn", `reaping ${kind} failed`, {
          namespace: ns,
          name,
          reason,
          error: e instanceof Error ? e.message : String(e),
        });
      }
    }
    return n;
  };

  return {
    jobs: await reapKind("job", jobs, jobReapReason, (n) => paths.job(ns, n)),
    pods: await reapKind("pod", pods, podReapReason, (n) => paths.pod(ns, n)),
    configMaps: await reapKind("configmap", configMaps, configMapReapReason, (n) =>
      paths.configMap(ns, n),
    ),
  };
}
