/**
 * The controller image's name, shared by the Operator (its default `image`) and
 * `cocoonset image build` (its default `--tag`), so the image a user builds without options
 * is the one the Operator deploys.
 */

/** Repository part of the default controller image reference. */
export const CONTROLLER_IMAGE_REPOSITORY = "pulumi-cocoonset/controller";

/** The default controller image for a package version: `pulumi-cocoonset/controller:<version>`. */
export function defaultControllerImage(version: string): string {
  return `${CONTROLLER_IMAGE_REPOSITORY}:${version}`;
}

/** UID and GID the controller runs as in the image and in the Operator's Deployment. */
export const CONTROLLER_UID = 65532;
