/**
 * How the Fleet and the Operator pass the standard resource options on to the resources they
 * are made of. Pulumi itself hands a component's `provider`/`providers`, `protect` and
 * `transforms` to its children, and children wait for the component's `dependsOn`; the rest
 * is done here: `retainOnDelete` goes to every child, and `ignoreChanges`, whose paths name
 * the component's arguments, becomes the matching paths of the children that hold them.
 */
import * as pulumi from "@pulumi/pulumi";

/** Paths of `ignoreChanges` for each child, by the child's role in the component. */
export type IgnoreMap<Role extends string> = Record<Role, string[]>;

/** The first segment of a property path (`spec.agent.image` → `spec`, `tags["a"]` → `tags`). */
function head(path: string): string {
  return /^[^.[]*/.exec(path)![0];
}

/** The rest of a path after its first segment, with its separator (`.agent.image`). */
function tail(path: string): string {
  return path.slice(head(path).length);
}

/**
 * Maps a Fleet's `ignoreChanges` onto its CocoonSet and slots resource. Paths under `spec`
 * (and under `idle`, `expiry` and `hooks`, which are the spec's fields) go to both (the slots resource derives its slots from the spec it is given, so the
 * ignored fields keep their deployed values in both); `namespace` to both; the slots
 * resource's own arguments to it; `*` to both. Anything else is refused, naming the path.
 */
export function fleetIgnoreChanges(
  component: string,
  paths: readonly string[] | undefined,
): IgnoreMap<"cocoonSet" | "slots" | "guard"> {
  const out: IgnoreMap<"cocoonSet" | "slots" | "guard"> = { cocoonSet: [], slots: [], guard: [] };
  for (const path of paths ?? []) {
    const first = head(path);
    if (path === "*") {
      out.cocoonSet.push("*");
      out.slots.push("*");
      // The guard keeps its token and claim: only what it shares with the slots is ignored.
      out.guard.push("spec", "namespace", "fanOut", "capacityCheck");
    } else if (first === "spec" || ["idle", "expiry", "hooks"].includes(first)) {
      // The policy arguments are fields of the spec.
      const specPath = first === "spec" ? path : `spec.${path}`;
      out.cocoonSet.push(specPath);
      out.slots.push(specPath);
      // The guard's dry runs are of the spec the CocoonSet gets.
      out.guard.push(specPath);
    } else if (path === "namespace") {
      out.cocoonSet.push("metadata.namespace");
      out.slots.push("namespace");
      out.guard.push("namespace");
    } else if (
      [
        "kubeconfig",
        "fanOut",
        "timeoutSeconds",
        "releaseTimeoutSeconds",
        "registry",
        "registryCa",
        "registryInsecure",
        "registryCredentials",
        "suspendTimeoutSeconds",
        "capacityCheck",
        "skipAwait",
      ].includes(first) &&
      tail(path) === ""
    ) {
      out.slots.push(path);
      if (["fanOut", "capacityCheck"].includes(first)) out.guard.push(path);
    } else {
      throw new pulumi.RunError(
        `Fleet ${component}: [ignoreChanges] ${JSON.stringify(path)} is not an argument of the Fleet that can be ignored; use "spec" or a path under it (for example "spec.agent.image"), "idle", "expiry" or "hooks" (or a path under one), "namespace", "kubeconfig", "fanOut", "timeoutSeconds", "releaseTimeoutSeconds", "registry", "registryCa", "registryInsecure", "registryCredentials", "suspendTimeoutSeconds", "capacityCheck", "skipAwait" or "*"`,
      );
    }
  }
  return out;
}

/** Where the Operator's ignorable arguments live in its controller Deployment. */
const OPERATOR_PATHS: Record<string, { deployment: string; rollout?: string }> = {
  image: { deployment: "spec.template.spec.containers[0].image", rollout: "image" },
  replicas: { deployment: "spec.replicas" },
  resources: { deployment: "spec.template.spec.containers[0].resources" },
};

/**
 * Maps an Operator's `ignoreChanges` onto its controller Deployment and rollout check:
 * `image`, `replicas` and `resources` (or a path under it), for a controller whose image or
 * size is managed by another tool. Anything else is refused, naming the path.
 */
export function operatorIgnoreChanges(
  component: string,
  paths: readonly string[] | undefined,
): IgnoreMap<"deployment" | "rollout"> {
  const out: IgnoreMap<"deployment" | "rollout"> = { deployment: [], rollout: [] };
  for (const path of paths ?? []) {
    const target = OPERATOR_PATHS[head(path)];
    if (!target || (head(path) !== "resources" && tail(path) !== "")) {
      throw new pulumi.RunError(
        `Operator ${component}: [ignoreChanges] ${JSON.stringify(path)} is not an argument of the Operator that can be ignored; use "image", "replicas" or "resources" (or a path under it)`,
      );
    }
    out.deployment.push(target.deployment + tail(path));
    if (target.rollout) out.rollout.push(target.rollout);
  }
  return out;
}

/** The parts of a URN: `urn:pulumi:<stack>::<project>::<qualified type>::<name>`. */
function urnParts(urn: string): { stack: string; project: string; name: string } {
  const [stack = "", project = "", , ...name] = urn.replace(/^urn:pulumi:/, "").split("::");
  return { stack, project, name: name.join("::") };
}

/**
 * The URN each of a component's aliases names (an old identity of the component), collapsed
 * as the SDK collapses them: an alias object's missing name, type, parent, project and stack
 * are the component's own; a `parent` key holding `undefined` (`pulumi.rootStackResource`)
 * means none.
 */
function aliasUrns(
  name: string,
  type: string,
  opts: pulumi.ComponentResourceOptions,
): pulumi.Output<string>[] {
  return (opts.aliases ?? []).map((alias) =>
    pulumi.output(alias).apply((a): pulumi.Output<string> => {
      if (typeof a === "string") return pulumi.output(a);
      const has = (k: keyof pulumi.Alias) => Object.prototype.hasOwnProperty.call(a, k);
      return pulumi.createUrn(
        has("name") ? a.name! : name,
        has("type") ? a.type! : type,
        has("parent") ? a.parent : opts.parent,
        has("project") ? a.project : undefined,
        has("stack") ? a.stack : undefined,
      );
    }),
  );
}

/**
 * The aliases of a component's children, one per alias of the component: the child's old
 * identity under the component's old URN (in its old stack and project), its name's prefix
 * renamed with the component, as the engine derives them for a child named
 * `<component>-<role>`.
 *
 * Why the components say it themselves: the engine derives a child's aliases from the alias
 * its parent matched, and a parent matches none once its new URN is in the state. A refused
 * `up` writes exactly that (components register before their children, whose guards then
 * refuse the move), so the program that adds the alias afterwards would get new children
 * that hold no ownership token, and be refused again. Explicit aliases still match, and
 * where the engine derives the same ones it counts each once.
 *
 * @returns a function of the child's name that gives the child's `aliases` option
 */
export function childAliases(
  name: string,
  type: string,
  opts: pulumi.ComponentResourceOptions,
): (childName: string) => Pick<pulumi.CustomResourceOptions, "aliases"> {
  const urns = aliasUrns(name, type, opts);
  if (urns.length === 0) return () => ({});
  return (childName) => ({
    aliases: urns.map((urn) => {
      const old = urn.apply(urnParts);
      return {
        name: childName.startsWith(name)
          ? old.apply((o) => o.name + childName.slice(name.length))
          : childName,
        parent: urn,
        project: old.apply((o) => o.project),
        stack: old.apply((o) => o.stack),
      };
    }),
  });
}

/** The options every child of a component gets besides `parent`: today `retainOnDelete`. */
export function childOptions(
  opts: pulumi.ComponentResourceOptions,
): Pick<pulumi.CustomResourceOptions, "retainOnDelete"> {
  return opts.retainOnDelete === undefined ? {} : { retainOnDelete: opts.retainOnDelete };
}

/** The component's own options: `ignoreChanges` names its arguments, not inputs it registers. */
export function componentOptions(
  opts: pulumi.ComponentResourceOptions,
): pulumi.ComponentResourceOptions {
  const own = { ...opts };
  delete own.ignoreChanges;
  return own;
}
