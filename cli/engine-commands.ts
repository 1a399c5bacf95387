/** `cocoonset reap` and `cocoonset release`: one reaper pass, and owner release, from a shell. */
import type { Command } from "commander";
import { KubeApiError, type KubeClient } from "../engine/kube/index.js";
import {
  reapNamespace,
  release,
  ReleaseError,
  ReleaseTimeoutError,
  validateReleaseOwner,
  type ReleaseLog,
} from "../engine/release/index.js";
import { action, CliError, parseTimeout } from "./common.js";
import {
  addClusterFlags,
  addOutputFlag,
  checkedNamespace,
  clusterClient,
  outputFormat,
  printDocument,
  type ClusterFlags,
} from "./cluster-flags.js";

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

/** Runs `fn` with a client and turns transport and release failures into readable errors. */
async function withClient<T>(
  flags: ClusterFlags,
  fn: (client: KubeClient) => Promise<T>,
): Promise<T> {
  // A short per-request deadline: an unreachable cluster should fail in seconds, not a minute.
  const client = clusterClient(flags);
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
  const reap = program
    .command("reap")
    .description(
      "run one orphan-reaper pass in a namespace: delete expired or deadline-exceeded ephemeral Jobs, pods and prompt ConfigMaps",
    );
  addClusterFlags(reap, "namespace to reap (default: the namespace of the kubeconfig's context)");
  addOutputFlag(reap, '{"jobs":n,"pods":n,"configMaps":n}');
  reap.action(
    action(async (opts: ClusterFlags & { output?: string; json?: boolean }) => {
      const format = outputFormat(opts);
      if (opts.namespace !== undefined)
        checkedNamespace(
          required("--namespace", opts.namespace, "the namespace to reap"),
          "--namespace",
        );
      let ns = "";
      const r = await withClient(opts, (client) => {
        ns = namespaceOf(opts.namespace, client, "the namespace to reap");
        return reapNamespace(client, ns, { log: stderrLog });
      });
      const out = { jobs: r.jobs, pods: r.pods, configMaps: r.configMaps };
      if (format) return printDocument(out, format);
      process.stdout.write(
        `reaped in ${ns}: ${plural(out.jobs, "Job", "Jobs")}, ${plural(out.pods, "pod", "pods")}, ${plural(out.configMaps, "ConfigMap", "ConfigMaps")}\n`,
      );
    }),
  );

  const releaseCmd = program
    .command("release")
    .description(
      "delete everything an owner owns in a namespace (Jobs, then pods, then ConfigMaps) and wait until it is gone",
    );
  addClusterFlags(
    releaseCmd,
    "namespace of the owner and its objects (default: the namespace of the kubeconfig's context)",
  );
  releaseCmd
    .option("--owner-kind <kind>", "kind of the owner, e.g. CocoonSet or Pod (required)")
    .option("--owner-name <name>", "name of the owner (required)")
    .option("--owner-uid <uid>", "uid of the owner: objects are selected by it (required)")
    .option(
      "--timeout <duration>",
      "how long to wait until everything is gone",
      parseTimeout,
      60_000,
    );
  addOutputFlag(releaseCmd, '{"jobs":n,"pods":n,"configMaps":n}');
  releaseCmd.action(
    action(
      async (
        opts: ClusterFlags & {
          ownerKind?: string;
          ownerName?: string;
          ownerUid?: string;
          timeout: number;
          output?: string;
          json?: boolean;
        },
      ) => {
        const format = outputFormat(opts);
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
        const r = await withClient(opts, (client) => {
          ns = namespaceOf(opts.namespace, client, "the owner's namespace");
          return release(client, owner, ns, {
            timeoutMs: opts.timeout,
            log: stderrLog,
            refuseReplacedOwner: true,
          });
        });
        const out = { jobs: r.jobs, pods: r.pods, configMaps: r.configMaps };
        if (format) return printDocument(out, format);
        process.stdout.write(
          `released ${owner.kind} ${ns}/${owner.name}: ${plural(out.jobs, "Job", "Jobs")}, ${plural(out.pods, "pod", "pods")}, ${plural(out.configMaps, "ConfigMap", "ConfigMaps")} deleted and gone\n`,
        );
      },
    ),
  );
}
