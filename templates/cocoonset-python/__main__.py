"""A CocoonSet fleet: the operator (CRD, RBAC, controller) and one fleet of a main agent plus
`replicas` sub-agents with a headless-browser toolbox next to them.

Config: `namespace`, `createNamespace`, `replicas`, `image` (prompted by `pulumi new`), and
`ociRegistry` (optional: the snapshot registry, which the Fleet takes from the Operator).
The `pulumi_cocoonset` SDK comes from the package's plugin: `pulumi package add
pulumi-resource-cocoonset` (see README.md).
"""

import pulumi
import pulumi_cocoonset as cocoonset

config = pulumi.Config()
namespace = config.get("namespace") or "agents"
create_namespace = config.get_bool("createNamespace")
replicas = config.get_int("replicas") or 3
image = config.get("image") or "agents/coder:1"
oci_registry = config.get("ociRegistry")

operator = cocoonset.Operator(
    "cocoonset",
    namespace=namespace,
    create_namespace=True if create_namespace is None else create_namespace,
    oci_registry=oci_registry,
)

fleet = cocoonset.Fleet(
    "agents",
    namespace=operator.namespace,
    operator=operator,
    spec=cocoonset.CocoonSetSpecArgs(
        agent=cocoonset.AgentSpecArgs(replicas=replicas, image=image),
        toolboxes=[cocoonset.ToolboxSpecArgs(name="browser", image="tools/browser:1")],
    ),
)

pulumi.export("cocoonSet", fleet.cocoon_set_name)
pulumi.export("pods", fleet.pod_names)
