/**
 * What the engine-backed resources return as outputs. Pulumi hands a resource's outputs back
 * to the program in the RegisterResource reply, which `pulumi preview --debug` and `-v=9`
 * logs print in full, secrets included; so a resource whose \`delete\` does not need the
 * kubeconfig keeps it as an input only.
 */

/** The inputs without the kubeconfig, as a resource's outputs. */
export function withoutKubeconfig<T extends { kubeconfig?: unknown }>(
  inputs: T,
): Omit<T, "kubeconfig"> {
  const outs: Partial<T> = { ...inputs };
  delete outs.kubeconfig;
  return outs as Omit<T, "kubeconfig">;
}
