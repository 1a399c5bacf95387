/**
 * Every read of the cluster a pass makes, as one interface: the engine asks a `Reader` and
 * never its client. Two implementations answer it: the fresh reads of the apiserver
 * (`freshReader` in pass-reads.ts: `pulumi up`, preview, `cocoonset plan`) and the
 * controller's informer caches (controller/fleet-cache.ts). Either way the same `planPass`
 * decides from what it is given, so the two cannot disagree on how to read a fleet, only on
 * how fresh the answer is (the controller's expectations cover that, docs/behaviour.md §6.2a).
 */
import type { ActivityLease } from "../idle/index.js";
import type { TargetNodeFacts } from "../lifecycle/index.js";
import type { CocoonHibernation, CocoonSet, Pod } from "../spec/index.js";

/** Where a pass reads the cluster from. */
export interface Reader {
  /** The CocoonSet, or undefined when it does not exist. */
  cocoonSet(namespace: string, name: string): Promise<CocoonSet | undefined>;
  /** The fleet's labelled pods, in the order the apiserver lists them (by name). */
  fleetPods(cs: CocoonSet): Promise<Pod[]>;
  /**
   * The pods that hold any of `names` in the fleet's namespace without its label (a name the
   * pass may create, docs/behaviour.md §3.21). The fresh read asks each name; the cache asks
   * only the names a create of its own found held (it creates first and reads on 409).
   */
  nameHolders(cs: CocoonSet, names: readonly string[]): Promise<Pod[]>;
  /**
   * The CocoonSets a VM name of `cs` could collide with (docs/behaviour.md §2.7): those whose
   * `<namespace>-<name>` equals its own or begins it at a dash, or it theirs; all of them when
   * `cs` claims a static VM identity, which any fleet may report. More is allowed (the fresh
   * read lists every one); fewer is not.
   */
  cocoonSetsForVmNames(cs: CocoonSet): Promise<CocoonSet[]>;
  /**
   * The CocoonSets one of whose members could run a VM named in `vms` (a fleet's VM names all
   * begin `vk-<namespace>-<name>-`): what a CocoonHibernation's pass attributes its pod's VM
   * against. `namespace` is the one read where the cluster's CocoonSets may not be listed.
   */
  cocoonSetsNamingVms(namespace: string, vms: readonly string[]): Promise<CocoonSet[]>;
  /** The CocoonHibernations of a namespace; none on a cluster without their CRD. */
  hibernations(namespace: string): Promise<CocoonHibernation[]>;
  /**
   * The activity Leases of `cs`'s members: those carrying its fleet-name label in its
   * namespace (the idle step and `cocoonset plan`'s forecast of the policies read them).
   */
  activityLeases(cs: CocoonSet): Promise<ActivityLease[]>;
  /** The CocoonHibernations whose recorded VM `cs` could be refused (engine/attribution). */
  hibernationsForVmNames(cs: CocoonSet): Promise<CocoonHibernation[]>;
  /**
   * A node as the migration and placement checks read it (docs/behaviour.md §3.17, §3.22).
   * An error is the answer, never thrown: the planner refuses a node it could not check.
   */
  node(name: string): Promise<TargetNodeFacts>;
}
