/**
 * A fleet whose agents work with two toolboxes: a headless `browser` VM run fresh from its
 * image, and a Windows `desktop` reached over RDP. Each toolbox is one pod
 * (`<fleet>-<toolbox>`) and one key in the slots diff, next to the numbered agent slots.
 *
 * Config: `namespace` (default `agents`), `replicas` (default 2), `operator` (default
 * true; false when the controller is managed elsewhere).
 */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Fleet, Operator } from "pulumi-cocoonset";

const config = new pulumi.Config();
const withOperator = config.getBoolean("operator") ?? true;

const operator = withOperator ? new Operator("cocoonset") : undefined;
const namespace = new k8s.core.v1.Namespace("agents", {
  metadata: { name: config.get("namespace") ?? "agents" },
});

const fleet = new Fleet("qa", {
  namespace: namespace.metadata.name,
  operator,
  spec: {
    agent: { replicas: config.getNumber("replicas") ?? 2, image: "agents/qa:1" },
    toolboxes: [
      { name: "browser", image: "toolboxes/chromium:126", mode: "run" },
      {
        name: "desktop",
        image: "toolboxes/windows-11:23h2",
        os: "windows",
        connType: "rdp",
        resources: { limits: { cpu: "4", memory: "8Gi" } },
      },
    ],
  },
});

export const pods = fleet.podNames;
export const phases = fleet.podPhases;
