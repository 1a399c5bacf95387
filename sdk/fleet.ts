/**
 * `cocoonset:index:Fleet` — one CocoonSet and its slots resource.
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { desiredSlots } from "../provider/dynamic/slot-view.js";
import {
  DEFAULT_RELEASE_TIMEOUT_SECONDS,
  DEFAULT_TIMEOUT_SECONDS,
  registryCredentialsProblem,
  slotsArgumentProblems,
} from "../provider/dynamic/slots.js";
import { DEFAULT_SUSPEND_TIMEOUT_SECONDS } from "../provider/dynamic/deploy-view.js";
import { API_VERSION } from "../engine/kube/api-names.js";
import {
  DEFAULT_FANOUT,
  KIND,
  LABELS,
  cocoonSetNameProblem,
  formatFailure,
  prefixedProperty,
  shardBucketOf,
  validateCocoonSetSpec,
  type CocoonSetSpec,
  type CocoonSetStatus,
  type ExpirySpec,
  type HooksSpec,
  type IdleSpec,
} from "../engine/spec/index.js";
import { CREATED_BY, OWNER_TOKEN } from "../provider/dynamic/ownership.js";
import { type CapacityCheck, DEFAULT_CAPACITY_CHECK } from "../provider/dynamic/dry-run.js";
import { ArgumentsError } from "./arguments-error.js";
import { kubeconfigInputs } from "./kubeconfig.js";
import { programOperators, type Operator } from "./operator.js";
import { resources } from "./resource-factory.js";
import {
  childAliases,
  childOptions,
  componentOptions,
  fleetIgnoreChanges,
} from "./resource-options.js";
import { PROVIDER_VERSION, type Slots } from "./slots.js";
import {
  POLICY_FIELDS,
  hooksUrlHasCredentials,
  policyProblems,
  withPolicy,
  type DeepInput,
  type FleetPolicy,
} from "./fleet-policy.js";

export type { DeepInput } from "./fleet-policy.js";

/** Arguments of {@link Fleet}. */
export interface FleetArgs {
  /** Namespace of the CocoonSet (it must exist; pass a Namespace's name to order after it). */
  namespace: pulumi.Input<string>;
  /**
   * Name of the CocoonSet.
   * @default the component name
   */
  name?: string;
  /**
   * The CocoonSet spec; any field may be an Output (it is resolved before validation).
   * A spec of plain values is validated when the program runs (the Fleet throws, naming the
   * field); one holding Outputs by the slots resource's `check`, so `pulumi preview` refuses
   * a bad spec either way.
   */
  spec: DeepInput<CocoonSetSpec>;
  /**
   * The operator whose CRD and controller this fleet uses; omit when the controller is
   * managed elsewhere. The fleet is destroyed before it, while the controller still runs.
   */
  operator?: Operator;
  /**
   * Kubeconfig text the slots resource uses (kept as a secret). Leave it out: the slots
   * resource then uses the kubeconfig of the Kubernetes provider the Fleet is given (its
   * `provider`/`providers` option, or its parent's), so it reaches the same cluster as the
   * CocoonSet. Either way it checks that the CocoonSet it acts on is the one this Fleet
   * created (same uid), and fails otherwise.
   * @default the provider's `kubeconfig` (and `context`); with the default provider, the
   * stack's `kubernetes:kubeconfig` config, else `$KUBECONFIG`, else `~/.kube/config`
   */
  kubeconfig?: pulumi.Input<string>;
  /**
   * Sub-agent creates in flight during `pulumi up`.
   * @default 8
   */
  fanOut?: number;
  /**
   * How long `pulumi up` waits for the fleet, in seconds: the main agent, the fan-out, then
   * every member the spec asks to run to be Ready. On timeout `up` fails naming each member
   * that is not Ready and why; the fleet is left as it is and the next `up` waits again.
   * (Pulumi's `customTimeouts` does not reach the engine-backed resources: this is the one.)
   * @default 300
   */
  timeoutSeconds?: number;
  /**
   * Return from `pulumi up` once the fleet's pods are created, without waiting for every
   * member to be Ready (the main agent is still waited for: the sub-agents fork from it). The
   * outputs (`phase`, `status`, `podPhases`) then say what was Ready at that moment, which
   * may be `Scaling`. Without it `up` returns only when the main agent, every sub-agent and
   * every toolbox the spec asks for is Ready (a suspended fleet, and members whose VM is asked
   * to hibernate, are not waited for), and the outputs show the fleet `Running`. Changing it
   * alone changes no slot.
   * @default false
   */
  skipAwait?: boolean;
  /**
   * How long `pulumi destroy` waits for the fleet's tree to be gone, in seconds.
   * @default 120
   */
  releaseTimeoutSeconds?: number;
  /**
   * The snapshot registry of the fleet's VMs, `host[:port][/prefix]` (what the node agent is
   * given as `OCI_REGISTRY`; `http://` or `https://` in front chooses the scheme, else http
   * for a loopback host and https for any other; plain http to a host that is not loopback
   * needs `registryInsecure`). Credentials come from the Docker keychain of the machine
   * that runs `pulumi` (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, and its
   * credential helpers). With it `pulumi up` acts on
   * `spec.suspend` (it returns once the fleet is Suspended, or after a wake once every VM is
   * up again) and `pulumi destroy` drops the VMs' snapshot tags per `snapshotPolicy`.
   * Without it `suspend` is stored and only a controller with `--oci-registry` acts on it.
   * @default the `ociRegistry` of the `operator`, if any
   */
  registry?: pulumi.Input<string>;
  /**
   * PEM CA bundle trusted for the registry's https, besides the system's roots.
   * @default the `ociRegistryCa` of the `operator` when `registry` is taken from it
   */
  registryCa?: pulumi.Input<string>;
  /**
   * Plain http to a `registry` host that is not loopback.
   * @default the `ociRegistryInsecure` of the `operator` when `registry` is taken from it, else false
   */
  registryInsecure?: boolean;
  /**
   * The registry's credentials, kept as a secret (encrypted in the state, never printed): a
   * user name and password (or access token), or an identity token. Use them where the
   * machine that runs `pulumi` has no Docker login for the registry (CI, a stack's config:
   * `pulumi config set --secret registryPassword …`).
   * @default the Docker keychain of the machine that runs `pulumi`
   */
  registryCredentials?: pulumi.Input<{
    username?: pulumi.Input<string>;
    password?: pulumi.Input<string>;
    identityToken?: pulumi.Input<string>;
  }>;
  /**
   * How long `pulumi up` waits for a suspend to reach phase Suspended, or a wake for every
   * VM to be up again, in seconds; on timeout `up` fails naming the pods still waited for.
   * @default 300
   */
  suspendTimeoutSeconds?: number;
  /**
   * Take over a CocoonSet of the same name that exists and that no Fleet created (applied
   * with `kubectl` or another tool, or by a Fleet of a pulumi-cocoonset that did not record
   * its owner): this stack then manages it, and `pulumi destroy` deletes it and its pods.
   * Without it such a CocoonSet is refused at preview and at `up`. A CocoonSet another Fleet
   * created (another stack, or another Fleet of this program) is refused either way.
   * @default false
   */
  adoptCocoonSet?: boolean;
  /**
   * What `pulumi preview` (and `up`'s own check, before any pod) does when the capacity
   * forecast says a node would refuse pods this deploy creates (sub-agents are bound to their
   * main agent's node, where no scheduler checks for room): `"refuse"` fails with one
   * `[slots.N] node … the kubelet would refuse slots …` reason per node; `"warn"` prints the
   * same lines as warnings and lets `up` go on; `"off"` lists no node or pod at all. A
   * kubeconfig that may not list nodes and pods cluster-wide gets a warning, never a failure.
   * Changing it alone changes no slot.
   * @default "refuse": a forecast that refuses is the point; `"warn"` is for clusters whose
   * nodes the forecast cannot see as they will be (an autoscaled pool adds nodes after it)
   */
  capacityCheck?: CapacityCheck;
  /**
   * The idle policy, the CocoonSet's `spec.idle` (give it here or in `spec`, not both): a
   * sub-agent or toolbox without activity for `after` (`30m`, `2h`) is hibernated, snapshot
   * kept, and woken by its next activity; when every member, the main agent included, is
   * idle, the controller suspends the whole fleet as `spec.suspend` would, without writing
   * the spec, so `pulumi up` shows no diff then. Changing it alone changes no slot.
   * @default none: nothing is hibernated for being idle
   * @see docs/lifecycle.md
   */
  idle?: DeepInput<IdleSpec>;
  /**
   * The expiry, the CocoonSet's `spec.expiry` (here or in `spec`, not both): `after` the
   * fleet's creation (or, with `since: "idle"`, its last activity) the fleet is suspended
   * (`action: "suspend"`, the default) or deleted (`"delete"`). Changing it alone changes no
   * slot.
   * @default none: the fleet lives until it is destroyed
   */
  expiry?: DeepInput<ExpirySpec>;
  /**
   * Lifecycle hooks, the CocoonSet's `spec.hooks` (here or in `spec`, not both): the
   * controller POSTs an event to `url` before a member hibernates, after it wakes and before
   * the fleet expires. A `url` holding credentials (`https://user:token@host/…`) makes the
   * Fleet keep its spec as a secret (encrypted in the state, masked in previews). Changing it
   * alone changes no slot.
   * @default none
   */
  hooks?: DeepInput<HooksSpec>;
}

/**
 * The CocoonSets the Fleets of this program declare, `namespace/name` → the Fleet's name: two
 * Fleets of one program must not declare the same CocoonSet (removing one would delete both).
 */
const declared = new Map<string, string>();

/** Records a Fleet's CocoonSet; fails naming the other Fleet when one declared it already. */
function claimInProgram(fleet: string, namespace: string, name: string): void {
  const key = `${namespace}/${name}`;
  const other = declared.get(key);
  if (other !== undefined && other !== fleet) {
    throw new ArgumentsError(`Fleet ${fleet}`, [
      `[name] the CocoonSet ${key} is already declared by the Fleet ${other} of this program; each Fleet needs a CocoonSet of its own (give one of them another \`name\` or namespace)`,
    ]);
  }
  declared.set(key, fleet);
}

/** Whether a value holds a Pulumi Output or a promise at any depth (then it is known later). */
function holdsInputs(v: unknown, seen = new Set<unknown>()): boolean {
  if (pulumi.Output.isInstance(v)) return true;
  if (v === null || typeof v !== "object" || seen.has(v)) return false;
  if (typeof (v as { then?: unknown }).then === "function") return true;
  seen.add(v);
  return Object.values(v).some((x) => holdsInputs(x, seen));
}

/** What preview says on a Fleet whose slots it cannot list. */
export const SLOTS_UNKNOWN_MESSAGE =
  "slots unknown until apply: the spec holds values known only during `pulumi up` (outputs of resources this deploy creates or changes), so this preview cannot list the slots that will be added, changed or removed";

/**
 * In a preview, once the spec's Outputs have resolved: when any value in it is still
 * unknown, says so on the Fleet (`apply` callbacks do not run on unknown values, so this
 * waits on the Output's own known flag instead).
 */
function reportUnknownSlots(fleet: pulumi.ComponentResource, spec: pulumi.Output<unknown>): void {
  // `isKnown` is the Output's own promise (absent from its typings): false when any value
  // inside it is unknown.
  const known = (spec as unknown as { isKnown?: Promise<boolean> }).isKnown;
  if (known === undefined) return;
  void known.then(
    (k) => (k ? undefined : pulumi.log.info(SLOTS_UNKNOWN_MESSAGE, fleet)),
    () => undefined, // a failing spec Output fails the resources that take it
  );
}

/** The failures of a spec validation, each `[spec.field] rule (got value)`. */
function specFailures(v: ReturnType<typeof validateCocoonSetSpec>): string[] {
  return v.ok
    ? []
    : v.failures.map((f) =>
        formatFailure({ ...f, property: prefixedProperty("spec", f.property) }),
      );
}

/** The status of a CocoonSet that has none yet. */
const EMPTY_STATUS: CocoonSetStatus = {
  readyAgents: 0,
  desiredAgents: 0,
  readyToolboxes: 0,
  desiredToolboxes: 0,
};

/** One agent fleet: a CocoonSet whose slots `pulumi up` materialises and `destroy` releases. */
export class Fleet extends pulumi.ComponentResource {
  /** Name of the CocoonSet. */
  readonly cocoonSetName: pulumi.Output<string>;
  /** uid of the CocoonSet. */
  readonly cocoonSetUid: pulumi.Output<string>;
  /** Pod name of each slot ("0" is the main agent; toolboxes by name). */
  readonly podNames: pulumi.Output<Record<string, string>>;
  /** Phase of each slot's pod. */
  readonly podPhases: pulumi.Output<Record<string, string>>;
  /** VM name of the main agent. */
  readonly mainVmName: pulumi.Output<string>;
  /**
   * The CocoonSet's phase after the last `pulumi up` (`Running`, `Suspended`, …): `Running`
   * once `up` returns, as it waits for every member to be Ready (unless `skipAwait`).
   */
  readonly phase: pulumi.Output<string>;
  /**
   * The CocoonSet's status as the last `pulumi up` left it: ready and desired counts, each
   * agent's and toolbox's pod, VM and IP, and the conditions; `readyAgents` equals
   * `desiredAgents` once `up` returns (unless `skipAwait`). Its counts are 0 and its lists
   * absent until an `up` has written a status (a stack deployed with an earlier version gets
   * it on its next `up`).
   */
  readonly status: pulumi.Output<CocoonSetStatus>;
  /** Namespace of the CocoonSet. */
  readonly namespace: pulumi.Output<string>;
  /** The CocoonSet spec, with every Output in it resolved. */
  readonly spec: pulumi.Output<CocoonSetSpec>;
  /**
   * The CocoonSet custom resource (the Kubernetes SDK's untyped resource: the typed view of
   * its state is {@link status} and {@link spec}).
   */
  readonly cocoonSet: k8s.apiextensions.CustomResource;
  /** The slots resource. */
  readonly slots: Slots;

  constructor(name: string, args: FleetArgs, opts: pulumi.ComponentResourceOptions = {}) {
    const csName = args.name ?? name;
    // Refused here, before anything is registered: a name that breaks the pods' name label,
    // numbers p-limit or the timers would choke on at create.
    // A spec given as plain values is checked here too: the CocoonSet resource comes before
    // the slots resource, and in an existing namespace its preview (a server-side dry run)
    // would fail first with the apiserver's words. A spec holding Outputs is checked once
    // they are known, by the slots resource's `check`.
    const policy = { idle: args.idle, expiry: args.expiry, hooks: args.hooks };
    const plainSpec = !holdsInputs(args.spec) && !holdsInputs(policy);
    const specProblems = plainSpec
      ? [
          ...policyProblems(args.spec as CocoonSetSpec, policy as FleetPolicy),
          ...specFailures(
            validateCocoonSetSpec(withPolicy(args.spec as CocoonSetSpec, policy as FleetPolicy)),
          ),
        ]
      : [];
    const problems = [
      ...(cocoonSetNameProblem(csName) ? [`[name] ${cocoonSetNameProblem(csName)}`] : []),
      // A registry given as an Output is checked by the slots resource's `check`.
      ...slotsArgumentProblems({
        ...args,
        registry: typeof args.registry === "string" ? args.registry : undefined,
        registryCa: typeof args.registryCa === "string" ? args.registryCa : undefined,
        registryCredentials: undefined,
      }).map((p) => p.reason),
      // Credentials holding Outputs are checked by the slots resource's `check`.
      ...[
        registryCredentialsProblem(
          holdsInputs(args.registryCredentials) ? undefined : args.registryCredentials,
          args.registry !== undefined || args.operator?.ociRegistry !== undefined,
        ),
      ].filter((p) => p !== undefined),
      ...specProblems,
    ];
    if (args.adoptCocoonSet !== undefined && typeof args.adoptCocoonSet !== "boolean") {
      problems.push(
        `[adoptCocoonSet] must be a boolean (got ${JSON.stringify(args.adoptCocoonSet)})`,
      );
    }
    if (problems.length > 0) {
      throw new ArgumentsError(`Fleet ${name}`, problems);
    }
    if (typeof args.namespace === "string") claimInProgram(name, args.namespace, csName);
    const ignore = fleetIgnoreChanges(name, opts.ignoreChanges);
    const registry = args.registry ?? args.operator?.ociRegistry;
    const fromOperator = args.registry === undefined;
    const registryCa = args.registryCa ?? (fromOperator ? args.operator?.ociRegistryCa : undefined);
    const registryInsecure =
      args.registryInsecure ?? (fromOperator ? args.operator?.ociRegistryInsecure : undefined);
    super("cocoonset:index:Fleet", name, {}, componentOptions(opts));
    // provider(s), protect and transforms reach the children through `parent`, and they
    // wait for the Fleet's dependsOn; retainOnDelete, ignoreChanges and the aliases that
    // follow the Fleet's own are passed on here.
    const aliased = childAliases(name, "cocoonset:index:Fleet", opts);
    const child = (childName: string) => ({
      parent: this,
      ...childOptions(opts),
      ...aliased(childName),
    });
    // Outputs anywhere in the spec resolve here; the resources take the same input.
    // The policy arguments join the spec there; one given twice fails once both are known.
    const givenPolicy = POLICY_FIELDS.some((f) => args[f] !== undefined);
    const plain = givenPolicy
      ? pulumi.all([args.spec, policy]).apply(([s, p]) => {
          const twice = policyProblems(s, p);
          if (twice.length > 0) throw new ArgumentsError(`Fleet ${name}`, twice);
          return withPolicy(s, p);
        })
      : pulumi.output(args.spec);
    if (pulumi.runtime.isDryRun() && !plainSpec) reportUnknownSlots(this, plain);
    // Credentials in the hook URL make the spec a secret wherever it is kept. The slots map
    // follows from `spec` alone (the policy arguments change no slot), so a secret hook
    // given as `hooks` leaves it readable and a preview still lists each slot's change.
    const spec = plain.apply((s) =>
      hooksUrlHasCredentials(s) ? pulumi.secret(s) : s,
    ) as pulumi.Output<CocoonSetSpec>;
    // Without an `operator`, the program's own Operators (constructed before it) still come
    // first: the CocoonSet waits for their CRD guards, so `destroy` deletes this fleet before
    // they check what is left (their CRD guard refused a CocoonSet this very destroy deletes).
    const others = args.operator ? [] : programOperators();
    const operatorDeps = args.operator
      ? [
          args.operator.crd,
          args.operator.deployment,
          args.operator.crdGuard,
          ...(args.operator.rollout ? [args.operator.rollout] : []),
        ]
      : others.map((o) => o.crdGuard);

    // A Fleet creates its CocoonSet or refuses one that another Fleet, or no stack, created:
    // the guard runs before the CocoonSet is applied (an apply takes over an existing object).
    const owner = `${pulumi.getProject()}/${pulumi.getStack()}/${name}`;
    const reach = kubeconfigInputs(this, args.kubeconfig);
    const kubeconfig = reach.kubeconfig;
    const guardName = `${name}-guard`;
    const guard = resources().fleetGuard(
      guardName,
      {
        kubeconfig,
        // A namespace given as text was claimed above, before anything was registered.
        namespace:
          typeof args.namespace === "string"
            ? args.namespace
            : pulumi.output(args.namespace).apply((ns) => {
                claimInProgram(name, ns, csName);
                return ns;
              }),
        name: csName,
        owner,
        ...(args.adoptCocoonSet ? { adopt: true } : {}),
        // Without an Operator (or a dependsOn that may install it) the CRD must be there.
        requireCrd: args.operator === undefined && opts.dependsOn === undefined,
        kubeconfigFile: reach.kubeconfigFile,
        kubeconfigContext: reach.kubeconfigContext,
        // The guard's check sends the pods this deploy creates as dry runs and forecasts them
        // against the nodes, before the CocoonSet is written.
        spec,
        fanOut: args.fanOut ?? DEFAULT_FANOUT,
        capacityCheck: args.capacityCheck ?? DEFAULT_CAPACITY_CHECK,
      },
      { ...child(guardName), ignoreChanges: ignore.guard },
    );

    const cocoonSetName = `${name}-cocoonset`;
    this.cocoonSet = new k8s.apiextensions.CustomResource(
      cocoonSetName,
      {
        apiVersion: API_VERSION,
        kind: KIND,
        metadata: {
          name: csName,
          namespace: args.namespace,
          // Its shard bucket, so a sharded controller's shard selects it from the start
          // (the controller labels a CocoonSet written without it once).
          labels: pulumi
            .output(args.namespace)
            .apply((ns) => ({ [LABELS.shardBucket]: String(shardBucketOf(ns, csName)) })),
          // The program's spec wins over an edit made with kubectl: a refreshing preview plans
          // to set it back, as the up that follows does (without force the preview failed on
          // the edit's field manager while the up went through). Taking over someone else's
          // CocoonSet is the claim guard's to refuse, not the apply's.
          annotations: {
            [CREATED_BY]: owner,
            [OWNER_TOKEN]: guard.ownerToken,
            "pulumi.com/patchForce": "true",
          },
        },
        spec,
      },
      {
        ...child(cocoonSetName),
        dependsOn: [guard, ...operatorDeps],
        ignoreChanges: ignore.cocoonSet,
        // The slots resource (or, without one, the guard) deletes the CocoonSet, and only while
        // it carries this Fleet's token: a delete of this resource (a Fleet moved under another
        // parent, whose new resources took the CocoonSet over) must not reach the cluster.
        retainOnDelete: true,
      },
    );

    const slotsName = `${name}-slots`;
    this.slots = resources().slots(
      slotsName,
      {
        ...reach,
        namespace: args.namespace,
        name: csName,
        uid: this.cocoonSet.metadata.uid,
        spec,
        // An invalid spec gets no slots here: the resource's check reports every failure.
        slots: pulumi
          .all([args.namespace, args.spec as pulumi.Input<CocoonSetSpec>])
          .apply(([ns, s]) => (validateCocoonSetSpec(s).ok ? desiredSlots(ns, csName, s) : {})),
        providerVersion: PROVIDER_VERSION,
        fanOut: args.fanOut ?? DEFAULT_FANOUT,
        timeoutSeconds: args.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
        releaseTimeoutSeconds: args.releaseTimeoutSeconds ?? DEFAULT_RELEASE_TIMEOUT_SECONDS,
        ...(registry === undefined ? {} : { registry }),
        ...(registry === undefined || registryCa === undefined ? {} : { registryCa }),
        ...(registry === undefined || registryInsecure === undefined ? {} : { registryInsecure }),
        ...(registry === undefined || args.registryCredentials === undefined
          ? {}
          : {
              registryCredentials: pulumi.secret(args.registryCredentials),
            }),
        suspendTimeoutSeconds: args.suspendTimeoutSeconds ?? DEFAULT_SUSPEND_TIMEOUT_SECONDS,
        // A namespace given as text must exist already; one from a resource, or one a
        // resource in `dependsOn` may create, may appear in this very deploy, so preview
        // cannot ask the cluster about it.
        checkNamespace: typeof args.namespace === "string" && opts.dependsOn === undefined,
        capacityCheck: args.capacityCheck ?? DEFAULT_CAPACITY_CHECK,
        ownerToken: guard.ownerToken,
        // Only when set: a stack deployed before it existed sees no new input.
        ...(args.skipAwait === true ? { skipAwait: true } : {}),
      },
      { ...child(slotsName), dependsOn: [this.cocoonSet], ignoreChanges: ignore.slots },
    );

    this.cocoonSetName = pulumi.output(csName);
    this.cocoonSetUid = this.slots.uid;
    this.podNames = this.slots.pods.apply((p) =>
      Object.fromEntries(Object.entries(p ?? {}).map(([k, v]) => [k, v.pod])),
    );
    this.podPhases = this.slots.pods.apply((p) =>
      Object.fromEntries(Object.entries(p ?? {}).map(([k, v]) => [k, v.phase])),
    );
    this.mainVmName = this.slots.mainVmName;
    this.phase = this.slots.phase.apply((p) => p ?? "");
    this.status = this.slots.status.apply((s) => s ?? EMPTY_STATUS);
    this.namespace = pulumi.output(args.namespace);
    this.spec = spec;
    this.registerOutputs({
      phase: this.phase,
      status: this.status,
      cocoonSetName: this.cocoonSetName,
      cocoonSetUid: this.cocoonSetUid,
      podNames: this.podNames,
      podPhases: this.podPhases,
      mainVmName: this.mainVmName,
    });
  }
}
