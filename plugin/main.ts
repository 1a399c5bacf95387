/**
 * Entry point of the `pulumi-resource-cocoonset` plugin (bin/pulumi-resource-cocoonset runs
 * it): serves the package provider to the Pulumi engine.
 */
import * as pulumi from "@pulumi/pulumi";
import { createRequire } from "node:module";
import { cocoonsetProvider } from "./provider.js";

const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };

await pulumi.provider.main(cocoonsetProvider(pkg.version), process.argv.slice(2));
