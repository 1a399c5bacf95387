/** A ConfigMap and a Deployment in the namespace given by config, awaited Ready. */
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";

const config = new pulumi.Config();
const namespace = config.require("namespace");
const greeting = config.get("greeting") ?? "hello";

const settings = new k8s.core.v1.ConfigMap("settings", {
  metadata: { namespace, name: "settings" },
  data: { purpose: "smoke" },
});

const labels = { app: "smoke" };
const web = new k8s.apps.v1.Deployment("web", {
  metadata: { namespace, name: "web", annotations: { greeting } },
  spec: {
    replicas: 2,
    selector: { matchLabels: labels },
    template: {
      metadata: { labels },
      spec: { containers: [{ name: "web", image: "registry.invalid/never-pulled:1" }] },
    },
  },
});

export const configMap = settings.metadata.name;
export const readyReplicas = web.status.readyReplicas;
