/* eslint-disable @typescript-eslint/no-unsafe-assignment -- Pulumi hands provider methods their inputs as `any`. */
/**
 * The `cocoonset` package provider: the Operator and Fleet components for programs in any
 * Pulumi language (`construct`), and the CRUD of the engine-backed custom resources the
 * components create there, delegated to the very provider objects the TypeScript SDK's
 * dynamic resources store (sdk/slots.ts, sdk/operator-resources.ts): one engine, one
 * implementation, reached two ways.
 */
import * as pulumi from "@pulumi/pulumi";
import type * as provider from "@pulumi/pulumi/provider/index.js";
import { type ArgumentProblem, ArgumentsError } from "../sdk/arguments-error.js";
import { Fleet, type FleetArgs } from "../sdk/fleet.js";
import { Operator, type OperatorArgs } from "../sdk/operator.js";
import {
  controllerRolloutProvider,
  crdGuardProvider,
  operatorGuardProvider,
} from "../sdk/operator-resources.js";
import { fleetGuardProvider } from "../sdk/fleet-guard.js";
import { useResources } from "../sdk/resource-factory.js";
import { slotsProvider } from "../sdk/slots.js";
import { PackageResource, packageResources, token } from "./resources.js";
import { packageSchema } from "./schema.js";
import { secretKeys, unwrapSecrets, wrapSecrets } from "./secrets.js";

/** The provider object behind each custom resource type of the package. */
export const engines: Record<string, pulumi.dynamic.ResourceProvider> = {
  [token("Slots")]: slotsProvider,
  [token("OperatorGuard")]: operatorGuardProvider,
  [token("ControllerRollout")]: controllerRolloutProvider,
  [token("CrdGuard")]: crdGuardProvider,
  [token("FleetGuard")]: fleetGuardProvider,
  [token("ArgumentsRefusal")]: {
    check: (olds, news) => argumentsRefusalProvider.check!(olds, news),
    create: (inputs) => argumentsRefusalProvider.create(inputs),
  },
};

/** The type token of a URN (`urn:pulumi:stack::project::parent$type::name`). */
export function typeOfUrn(urn: string): string {
  const qualified = urn.split("::")[2] ?? "";
  return qualified.split("$").pop() ?? "";
}

function engineFor(urn: string): pulumi.dynamic.ResourceProvider {
  const type = typeOfUrn(urn);
  const engine = engines[type];
  // A programmer error: the engine only asks for the types the package's schema declares.
  if (!engine) throw new Error(`cocoonset: unknown resource type ${type}`);
  return engine;
}

/** What the Operator's children are called, by the Operator's URN (see sdk/operator.ts). */
export function operatorChildren(operatorUrn: string): Operator {
  const [head, project, type, ...rest] = operatorUrn.split("::");
  const name = rest.join("::");
  const child = (childType: string, childName: string) =>
    new pulumi.DependencyResource(`${head}::${project}::${type}$${childType}::${childName}`);
  // The Fleet orders its CocoonSet after these (and its destroy before them).
  return {
    crd: child("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", `${name}-crd`),
    deployment: child("kubernetes:apps/v1:Deployment", `${name}-controller`),
    crdGuard: child(token("CrdGuard"), `${name}-crd-guard`),
  } as unknown as Operator;
}

/**
 * The snapshot registry settings of each Operator this process constructed, by URN. The
 * engine sends every construct of a deployment to one provider process, and an Operator is
 * constructed before any Fleet that names it, so a Fleet finds its Operator's here.
 */
const operatorRegistries = new Map<
  string,
  Pick<Operator, "ociRegistry" | "ociRegistryCa" | "ociRegistryInsecure">
>();

/** The value of an input the components take as plain (not an Output); fails when unknown. */
async function plain(field: string, v: unknown): Promise<unknown> {
  if (!pulumi.Output.isInstance(v)) return v;
  const o = v as unknown as { isKnown: Promise<boolean>; promise(): Promise<unknown> };
  if (!(await o.isKnown)) {
    throw new ArgumentsError("cocoonset", [`[${field}] must be known when the program runs`]);
  }
  return o.promise();
}

/** The URN an `operator` input names: a resource reference arrives as its URN. */
async function operatorUrn(v: unknown): Promise<string | undefined> {
  const value = await plain("operator", v);
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value === "string") return value;
  if (pulumi.Resource.isInstance(value)) return plain("operator", value.urn) as Promise<string>;
  throw new ArgumentsError("cocoonset", ["[operator] must be a cocoonset:index:Operator"]);
}

/** The inputs with the named ones resolved to plain values. */
async function withPlain(
  inputs: pulumi.Inputs,
  fields: readonly string[],
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { ...inputs };
  for (const f of fields) {
    if (out[f] === undefined) delete out[f];
    else out[f] = await plain(f, out[f]);
  }
  return out;
}

/** Operator inputs the component reads as plain values (the rest may be Outputs). */
const OPERATOR_PLAIN = [
  "namespace",
  "createNamespace",
  "imagePullSecrets",
  "replicas",
  "shards",
  "leaderElect",
  "watchNamespaces",
  "concurrency",
  "fanoutConcurrency",
  "reapInterval",
  "logLevel",
  "ociRegistry",
  "hibernateTimeout",
  "wakeTimeout",
  "retainCrdOnDelete",
  "adoptCrd",
  "skipAwait",
  "rolloutTimeoutSeconds",
] as const;

/** Fleet inputs the component reads as plain values. */
const FLEET_PLAIN = [
  "name",
  "fanOut",
  "timeoutSeconds",
  "releaseTimeoutSeconds",
  "suspendTimeoutSeconds",
  "capacityCheck",
  "skipAwait",
] as const;

/**
 * A component's refused arguments as input property errors, which the engine prints per
 * property for a program in any language (no traceback of the language's host); any other
 * error as it is.
 */
async function construct(
  name: string,
  type: string,
  inputs: pulumi.Inputs,
  options: pulumi.ComponentResourceOptions,
): Promise<provider.ConstructResult> {
  try {
    return await constructComponent(name, type, inputs, options);
  } catch (e) {
    if (!ArgumentsError.isInstance(e)) throw e;
    // The component stands, holding one resource whose `check` fails with the problems: the
    // engine prints each as a property failure and fails the deployment before anything is
    // written, as for any resource's bad input, while the program's registration of the
    // component succeeds. (A failed construct reaches a Python program as "resource monitor
    // shut down", which its host prints with a traceback.)
    const refused = new pulumi.ComponentResource(type, name, {}, options);
    const refusal = new PackageResource(
      token("ArgumentsRefusal"),
      `${name}-arguments`,
      { component: e.message, problems: e.problems },
      { parent: refused },
    );
    // Registered before the component is answered for.
    await new Promise((resolve) => refusal.urn.apply(resolve));
    return { urn: refused.urn, state: {} };
  }
}

/**
 * The provider of `cocoonset:index:ArgumentsRefusal`: its `check` refuses the problems it is
 * given, one failure per property; nothing else is ever asked of it.
 */
export const argumentsRefusalProvider: pulumi.dynamic.ResourceProvider = {
  check(_olds: unknown, news: { problems?: ArgumentProblem[] }) {
    const failures = (news.problems ?? []).map((p) => ({
      property: p.propertyPath,
      reason: p.reason,
    }));
    return Promise.resolve({ inputs: news, failures });
  },
  create() {
    // A programmer error: the engine never creates a resource whose check failed.
    return Promise.reject(new Error("cocoonset: an ArgumentsRefusal is never created"));
  },
};

async function constructComponent(
  name: string,
  type: string,
  inputs: pulumi.Inputs,
  options: pulumi.ComponentResourceOptions,
): Promise<provider.ConstructResult> {
  if (type === token("Operator")) {
    const args = (await withPlain(inputs, OPERATOR_PLAIN)) as OperatorArgs;
    const op = new Operator(name, args, options);
    operatorRegistries.set((await plain("urn", op.urn)) as string, {
      ociRegistry: op.ociRegistry,
      ociRegistryCa: op.ociRegistryCa,
      ociRegistryInsecure: op.ociRegistryInsecure,
    });
    return {
      urn: op.urn,
      state: {
        namespace: op.namespace,
        crdName: op.crdName,
        serviceAccountName: op.serviceAccountName,
        deploymentName: op.deploymentName,
      },
    };
  }
  if (type === token("Fleet")) {
    const args = await withPlain(inputs, FLEET_PLAIN);
    const urn = await operatorUrn(inputs.operator);
    args.operator = urn ? { ...operatorChildren(urn), ...operatorRegistries.get(urn) } : undefined;
    const fleet = new Fleet(name, args as unknown as FleetArgs, options);
    return {
      urn: fleet.urn,
      state: {
        cocoonSetName: fleet.cocoonSetName,
        cocoonSetUid: fleet.cocoonSetUid,
        podNames: fleet.podNames,
        podPhases: fleet.podPhases,
        mainVmName: fleet.mainVmName,
        phase: fleet.phase,
        status: fleet.status,
      },
    };
  }
  // A programmer error, as in engineFor.
  throw new Error(`cocoonset: unknown component type ${type}`);
}

/** Plain JSON (no `undefined` anywhere): what the provider host can put on the wire. */
function json<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/** Rethrows a created-but-failed error (`{ id, properties, reasons }`) with secrets wrapped. */
function wrapInitError(e: unknown, keys: Set<string>): unknown {
  const err = e as { id?: string; properties?: unknown; reasons?: string[]; message?: string };
  if (!err || typeof err !== "object" || !err.id) return e;
  return {
    id: err.id,
    properties: json(wrapSecrets(err.properties, keys)),
    reasons: err.reasons,
    message: err.message,
  };
}

/** The package provider, for `pulumi.provider.main`. */
export function cocoonsetProvider(version: string): provider.Provider {
  // Components built here create the package's custom resources, not dynamic ones.
  useResources(packageResources);
  const schema = JSON.stringify(packageSchema(version));
  return {
    version,
    schema,
    construct,
    async check(urn, olds, news) {
      const engine = engineFor(urn);
      if (!engine.check) return { inputs: news };
      const r = await engine.check(unwrapSecrets(olds), unwrapSecrets(news));
      return {
        inputs: json(wrapSecrets(r.inputs ?? unwrapSecrets(news), secretKeys(news))),
        failures: r.failures,
      };
    },
    async diff(id, urn, olds, news) {
      const engine = engineFor(urn);
      if (!engine.diff) return {};
      return engine.diff(id, unwrapSecrets(olds), unwrapSecrets(news));
    },
    async create(urn, inputs) {
      const keys = secretKeys(inputs);
      try {
        const r = await engineFor(urn).create(unwrapSecrets(inputs));
        return { id: r.id, outs: json(wrapSecrets(r.outs ?? unwrapSecrets(inputs), keys)) };
      } catch (e) {
        throw wrapInitError(e, keys);
      }
    },
    async read(id, urn, props) {
      const engine = engineFor(urn);
      if (!engine.read) return { id, props };
      const keys = secretKeys(props);
      const r = await engine.read(id, unwrapSecrets(props));
      return {
        id: r.id,
        props: json(wrapSecrets(r.props, keys)),
        ...(r.inputs === undefined ? {} : { inputs: json(wrapSecrets(r.inputs, keys)) }),
      };
    },
    async update(id, urn, olds, news) {
      const engine = engineFor(urn);
      const keys = secretKeys(news);
      if (!engine.update) return { outs: news };
      try {
        const r = await engine.update(id, unwrapSecrets(olds), unwrapSecrets(news));
        return { outs: json(wrapSecrets(r.outs ?? unwrapSecrets(news), keys)) };
      } catch (e) {
        throw wrapInitError(e, keys);
      }
    },
    async delete(id, urn, props) {
      await engineFor(urn).delete?.(id, unwrapSecrets(props));
    },
  };
}
