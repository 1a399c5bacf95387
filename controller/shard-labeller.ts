/**
 * Labels, once, the CocoonSets, pods and CocoonHibernations that do not carry their fleet's
 * shard bucket yet: CocoonSets written by others than the Fleet (kubectl, GitOps), the pods
 * of fleets created before the label existed (or by an older controller during an upgrade),
 * and every CocoonHibernation, which its author creates without it. A shard's informers
 * select on the label, so an object without it is no shard's until it has it. A CocoonSet's
 * bucket is its own name's; one whose label says another bucket (edited by hand) is set right
 * by the shard that holds it ({@link ShardLabeller.relabel}).
 *
 * A pod's bucket is its fleet's (its namespace and fleet label); a CocoonHibernation's is its
 * pod's fleet's, read from the pod once (the bucket of its pod's name when the pod is gone or
 * is no fleet's), so the CR is seen by the shard that sees its pod. The write is a merge patch
 * of the one label: no pod is recreated, and the value is a function of what the object
 * already says, so two processes that label one object agree. To write each object once,
 * each process labels only its own share of them (by its own count), and before its caches
 * list, so the first list of a shard already holds its fleets' pods.
 */
import type { Logger } from "pino";
import { errorMessage } from "../engine/kube/branded-error.js";
import { isNotFound, paths, type KubeClient, type KubeObject } from "../engine/kube/index.js";
import { LABELS, shardBucketOf } from "../engine/spec/index.js";
import { Informer } from "./informer.js";
import { shardOfBucket, type Shard } from "./shard.js";

/** The selector of the objects the labeller looks at: those without the bucket label. */
const UNLABELLED = `!${LABELS.shardBucket}`;

/** What {@link ShardLabeller} watches and writes. */
export interface ShardLabellerOptions {
  client: KubeClient;
  /** The watched namespaces (`[undefined]`: all of them). */
  scopes: readonly (string | undefined)[];
  /** The managed pods' selector (the pod cache's); undefined: no pods are labelled. */
  podSelector?: string;
  /** Whether CocoonHibernations are labelled (only where their CRD is watched). */
  hibernations: boolean;
  /** Whether CocoonSets are labelled. @default false */
  cocoonSets?: boolean;
  shard: Shard;
  log?: Logger;
}

/** Watches the unlabelled objects of its scopes and labels its share. */
export class ShardLabeller {
  private readonly sets: Informer[];
  private readonly pods: Informer[];
  private readonly crs: Informer[];
  private readonly inFlight = new Set<Promise<void>>();
  private labelled = 0;

  constructor(private readonly opts: ShardLabellerOptions) {
    const { client, log } = opts;
    const podSelector = opts.podSelector;
    this.sets = (opts.cocoonSets ? opts.scopes : []).map(
      (ns) => new Informer({ client, path: paths.cocoonSets(ns), labelSelector: UNLABELLED, log }),
    );
    this.pods = (podSelector === undefined ? [] : opts.scopes).map(
      (ns) =>
        new Informer({
          client,
          path: ns === undefined ? "/api/v1/pods" : paths.pods(ns),
          labelSelector: [podSelector, UNLABELLED].filter((x) => x).join(","),
          log,
        }),
    );
    this.crs = (opts.hibernations ? opts.scopes : []).map(
      (ns) =>
        new Informer({
          client,
          path: paths.cocoonHibernations(ns),
          labelSelector: UNLABELLED,
          log,
        }),
    );
    for (const i of this.sets) i.addHandlers({ onAdd: (cs) => this.track(this.labelSet(cs)) });
    for (const i of this.pods) i.addHandlers({ onAdd: (p) => this.track(this.labelPod(p)) });
    for (const i of this.crs) i.addHandlers({ onAdd: (cr) => this.track(this.labelCr(cr)) });
  }

  /** How many objects this process labelled. */
  count(): number {
    return this.labelled;
  }

  /**
   * Starts watching; resolves once the objects unlabelled at the start are labelled (or
   * failed: the watch offers each again on its next re-list).
   */
  async start(): Promise<void> {
    const all = [...this.sets, ...this.pods, ...this.crs];
    for (const i of all) i.start();
    await Promise.all(all.map((i) => i.waitForSync()));
    await Promise.all([...this.inFlight]);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sets, ...this.pods, ...this.crs].map((i) => i.stop()));
    await Promise.all([...this.inFlight]);
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private mine(bucket: number): boolean {
    return shardOfBucket(bucket, this.opts.shard.count) === this.opts.shard.index;
  }

  /**
   * Sets right the bucket label of a CocoonSet this process holds (its cache selected it by
   * that label) when the label is not its name's bucket: the fleet's pods carry its name's,
   * so it moves to the shard that holds them.
   */
  relabel(cs: KubeObject): void {
    const ns = cs.metadata.namespace;
    const label = cs.metadata.labels?.[LABELS.shardBucket];
    if (!ns || !cs.metadata.name || label === undefined) return;
    const bucket = shardBucketOf(ns, cs.metadata.name);
    if (label === String(bucket)) return;
    this.track(this.patch(paths.cocoonSet(ns, cs.metadata.name), bucket));
  }

  private async labelSet(cs: KubeObject): Promise<void> {
    const ns = cs.metadata.namespace;
    if (!ns || !cs.metadata.name) return;
    const bucket = shardBucketOf(ns, cs.metadata.name);
    if (!this.mine(bucket)) return;
    await this.patch(paths.cocoonSet(ns, cs.metadata.name), bucket);
  }

  private async labelPod(pod: KubeObject): Promise<void> {
    const ns = pod.metadata.namespace;
    const fleet = pod.metadata.labels?.[LABELS.name];
    if (!ns || !fleet || !pod.metadata.name) return;
    const bucket = shardBucketOf(ns, fleet);
    if (!this.mine(bucket)) return;
    await this.patch(paths.pod(ns, pod.metadata.name), bucket);
  }

  private async labelCr(cr: KubeObject): Promise<void> {
    const ns = cr.metadata.namespace;
    const podName = (cr as { spec?: { podRef?: { name?: string } } }).spec?.podRef?.name;
    if (!ns || !cr.metadata.name || !podName) return;
    // Each process reads the pods of its own share of the CRs, by the CR's own name.
    if (!this.mine(shardBucketOf(ns, cr.metadata.name))) return;
    let bucket = shardBucketOf(ns, podName);
    try {
      const pod = await this.opts.client.get<KubeObject>(paths.pod(ns, podName));
      const fleet = pod.metadata.labels?.[LABELS.name];
      if (fleet) bucket = shardBucketOf(ns, fleet);
    } catch (e) {
      if (!isNotFound(e)) {
        this.opts.log?.warn(
          { namespace: ns, name: cr.metadata.name, err: errorMessage(e) },
          "reading a CocoonHibernation's pod to label it failed",
        );
        return;
      }
    }
    await this.patch(paths.cocoonHibernation(ns, cr.metadata.name), bucket);
  }

  private async patch(path: string, bucket: number): Promise<void> {
    try {
      await this.opts.client.patch(path, {
        metadata: { labels: { [LABELS.shardBucket]: String(bucket) } },
      });
      this.labelled++;
      this.opts.log?.debug({ path, bucket }, "labelled with its shard bucket");
    } catch (e) {
      // Gone meanwhile: nothing to label.
      if (isNotFound(e)) return;
      this.opts.log?.warn({ path, err: errorMessage(e) }, "labelling with the shard bucket failed");
    }
  }
}
