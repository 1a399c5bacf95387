/** `cocoonset-dev image build|stage`: the controller image, built without a Docker daemon. */
import type { Command } from "commander";
import { buildImage, ImageError, pushImage, stageRootfs } from "../image.js";
import { action, CliError, printJson } from "../../cli/common.js";

const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

/** Runs `fn`, turning an {@link ImageError} into a user-facing error. */
function userErrors<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (ImageError.isInstance(e)) throw new CliError(e.message);
    throw e;
  }
}

/** Registers the image commands. */
export function registerImage(program: Command): void {
  const image = program
    .command("image")
    .description("the controller image (controller/Dockerfile), built with buildah");
  image
    .command("build")
    .description(
      "build the controller image with buildah, reproducibly (created time $SOURCE_DATE_EPOCH, else the commit time of HEAD), and print its size and digest; with --push, push it with the Docker config's credentials and print REF@sha256:…",
    )
    .option("--tag <ref>", "image reference (default: pulumi-cocoonset/controller:<version>)")
    .option(
      "--push <ref>",
      "push the built image to REF (registry/repository[:tag]) and print REF@sha256:… for the Operator's image (or cocoonset manifests --image)",
    )
    .option(
      "--authfile <path>",
      "Docker config with the registry's credentials (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json)",
    )
    .option("--push-ca-file <path>", "PEM CA bundle trusted for the registry's https")
    .option("--push-insecure", "plain http, or https without checking the certificate")
    .option("--json", "print the result as JSON")
    .action(
      action(
        async (opts: {
          tag?: string;
          push?: string;
          authfile?: string;
          pushCaFile?: string;
          pushInsecure?: boolean;
          json?: boolean;
        }) => {
          const log = opts.json ? undefined : (l: string) => process.stdout.write(`${l}\n`);
          const built = userErrors(() => buildImage({ tag: opts.tag, log }));
          const pushed = opts.push
            ? userErrors(() =>
                pushImage({
                  source: built.tag,
                  ref: opts.push!,
                  authFile: opts.authfile,
                  caFile: opts.pushCaFile,
                  insecure: opts.pushInsecure,
                }),
              )
            : undefined;
          const r = { ...built, ...(pushed ? { pushed } : {}) };
          if (opts.json) return printJson(r);
          process.stdout.write(
            [
              `image    ${r.tag}`,
              `id       ${r.id}`,
              `digest   ${r.digest}`,
              `size     ${mib(r.size)} (${mib(r.compressedSize)} compressed)`,
              `files    ${r.files}`,
              `node     ${r.nodeVersion}`,
              `created  ${r.created}`,
              `revision ${r.labels["org.opencontainers.image.revision"] ?? ""}`,
              ...(pushed ? [`pushed   ${pushed}`] : []),
            ].join("\n") + "\n",
          );
        },
      ),
    );
  image
    .command("stage")
    .description(
      "write the image's file tree into a folder (the step controller/Dockerfile's build stage runs)",
    )
    .requiredOption("--out <dir>", "empty or missing folder")
    .option("--json", "print what was written as JSON")
    .action(
      action(async (opts: { out: string; json?: boolean }) => {
        const r = userErrors(() => stageRootfs({ out: opts.out }));
        if (opts.json) return printJson(r);
        process.stdout.write(
          `staged ${r.files.length} entries, ${mib(r.bytes)}, Node ${r.nodeVersion}, packages: ${r.packages.join(" ")}\n`,
        );
      }),
    );
}
