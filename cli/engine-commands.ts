/** `cocoonset reap` and `cocoonset release`: one reaper pass, and owner release, from a shell. */
import type { Command } from "commander";
import { namespaceNameProblem } from "../engine/spec/index.js";
import { KubeApiError, KubeClient, KubeConfigError } from "../engine/kube/index.js";
import {
  reapNamespace,
  release,
  ReleaseError,
  ReleaseTimeoutError,
  validateReleaseOwner,
  type ReleaseLog,
} from "../engine/release/index.js";
import { action, CliError, parseTimeout, printJson } from "./common.js";

const kubeconfigHelp =
  "kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)";

/** Warnings go to stderr so `--json` output stays one document. */
const stderrLog: ReleaseLog = (level, msg, fields) => {
  if (level === "debug" && !process.env.COCOONSET_DEBUG) return;
  if (level === "info") return;
  process.stderr.write(
    `cocoonset: ${level}: ${msg}${fields ? ` ${JSON.stringify(fields)}` : ""}\n`,
  );
};

function required(flag: string, value: string | undefined, hint: string): string {
  if (value === undefined) throw new CliError(`missing ${flag}: ${hint}`);
  if (value.trim() === "") throw new CliError(`${flag} must not be empty: ${hint}`);
  return value.trim();
}

/** A namespace that could never exist is refused here, before any request. */
function checkedNamespace(ns: string, from: string): string {
  const problem = namespaceNameProblem(ns);
  if (problem) throw new CliError(`[${from}] ${problem} (got ${JSON.stringify(ns)})`);
  return ns;
}

/** `--namespace`, else the namespace of the kubeconfig's current context (as kubectl does). */
function namespaceOf(flag: string | undefined, client: KubeClient, hint: string): string {
  if (flag !== undefined)
    return checkedNamespace(required("--namespace", flag, hint), "--namespace");
  const fromContext = client.contextNamespace;
  if (fromContext)
    return checkedNamespace(fromContext, `namespace of the current context of ${client.source}`);
  throw new CliError(
    `missing --namespace: ${hint} (the current context of ${client.source} names no namespace either)`,
  );
}

function connect(kubeconfig: string | undefined): KubeClient {
  try {
    // A short per-request deadline: an unreachable cluster should fail in seconds, not a minute.
    return new KubeClient({ kubeconfig, requestTimeoutMs: 15_000 });
  } catch (e) {
    if (KubeConfigError.isInstance(e)) throw new CliError(e.message);
    throw e;
  }
}

/** Runs `fn` with a client and turns transport and release failures into readable errors. */
async function withClient<T>(
  kubeconfig: string | undefined,
  fn: (client: KubeClient) => Promise<T>,
): Promise<T> {
  const client = connect(kubeconfig);
  try {
    return await fn(client);
  } catch (e) {
    if (KubeApiError.isInstance(e) && e.status === 0)
      throw new CliError(`${e.message}; kubeconfig: ${client.source}`);
    if (KubeApiError.isInstance(e) && e.status === 401)
      throw new CliError(`${e.message}; the credentials in ${client.source} were rejected`);
    if (ReleaseError.isInstance(e) || ReleaseTimeoutError.isInstance(e))
      throw new CliError(e.message);
    throw e;
  } finally {
    client.close();
  }
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** Registers `reap` and `release`. */
export function registerReleaseAndReap(program: Command): void {
  program
    .command("reap")
    .description(
      "run one orphan-reaper pass in a namespace: delete expired or deadline-exceeded ephemeral Jobs, pods and prompt ConfigMaps",
    )
    .option(
      "--namespace <ns>",
      "namespace to reap (default: the namespace of the kubeconfig's current context)",
    )
    .option("--kubeconfig <path>", kubeconfigHelp)
    .option("--json", 'print {"jobs":n,"pods":n,"configMaps":n}')
    .action(
      action(async (opts: { namespace?: string; kubeconfig?: string; json?: boolean }) => {
        if (opts.namespace !== undefined)
          checkedNamespace(
            required("--namespace", opts.namespace, "the namespace to reap"),
            "--namespace",
          );
        let ns = "";
        const r = await withClient(opts.kubeconfig, (client) => {
          ns = namespaceOf(opts.namespace, client, "the namespace to reap");
          return reapNamespace(client, ns, { log: stderrLog });
        });
        const out = { jobs: r.jobs, pods: r.pods, configMaps: r.configMaps };
        if (opts.json) return printJson(out);
        process.stdout.write(
          `reaped in ${ns}: ${plural(out.jobs, "Job", "Jobs")}, ${plural(out.pods, "pod", "pods")}, ${plural(out.configMaps, "ConfigMap", "ConfigMaps")}\n`,
        );
      }),
    );

  program
    .command("release")
    .description(
      "delete everything an owner owns in a namespace (Jobs, then pods, then ConfigMaps) and wait until it is gone",
    )
    .option(
      "--namespace <ns>",
      "namespace of the owner and its objects (default: the namespace of the kubeconfig's current context)",
    )
    .option("--owner-kind <kind>", "kind of the owner, e.g. CocoonSet or Pod (required)")
    .option("--owner-name <name>", "name of the owner (required)")
    .option("--owner-uid <uid>", "uid of the owner: objects are selected by it (required)")
    .option(
      "--timeout <duration>",
      "how long to wait until everything is gone",
      parseTimeout,
      60_000,
    )
    .option("--kubeconfig <path>", kubeconfigHelp)
    .option("--json", 'print {"jobs":n,"pods":n,"configMaps":n}')
    .action(
      action(
        async (opts: {
          namespace?: string;
          ownerKind?: string;
          ownerName?: string;
          ownerUid?: string;
          timeout: number;
          kubeconfig?: string;
          json?: boolean;
        }) => {
          const uidHint = "kubectl get KIND NAME -o jsonpath='{.metadata.uid}' prints it";
          const owner = {
            kind: required("--owner-kind", opts.ownerKind, "the owner's kind, e.g. CocoonSet"),
            name: required("--owner-name", opts.ownerName, "the owner's name"),
            uid: required("--owner-uid", opts.ownerUid, uidHint),
          };
          try {
            validateReleaseOwner(owner);
          } catch (e) {
            // The library names its fields; here they are the flags that carry them.
            if (ReleaseError.isInstance(e))
              throw new CliError(e.message.replace(/^\[owner\.(kind|name|uid)\]/, "[--owner-$1]"));
            throw e;
          }
          if (opts.namespace !== undefined)
            checkedNamespace(
              required("--namespace", opts.namespace, "the owner's namespace"),
              "--namespace",
            );
          let ns = "";
          const r = await withClient(opts.kubeconfig, (client) => {
            ns = namespaceOf(opts.namespace, client, "the owner's namespace");
            return release(client, owner, ns, {
              timeoutMs: opts.timeout,
              log: stderrLog,
              refuseReplacedOwner: true,
            });
          });
          const out = { jobs: r.jobs, pods: r.pods, configMaps: r.configMaps };
          if (opts.json) return printJson(out);
          process.stdout.write(
            `released ${owner.kind} ${ns}/${owner.name}: ${plural(out.jobs, "Job", "Jobs")}, ${plural(out.pods, "pod", "pods")}, ${plural(out.configMaps, "ConfigMap", "ConfigMaps")} deleted and gone\n`,
          );
        },
      ),
    );
}
