// A CocoonSet fleet: the operator (CRD, RBAC, controller) and one fleet of a main agent plus
// `replicas` sub-agents with a headless-browser toolbox next to them.
//
// Config: `namespace`, `createNamespace`, `replicas`, `image` (prompted by `pulumi new`), and
// `ociRegistry` (optional: the snapshot registry, which the Fleet takes from the Operator).
// The cocoonset SDK comes from the package's plugin: `pulumi package add
// pulumi-resource-cocoonset` (see README.md).
package main

import (
	"github.com/cocoonstack/pulumi-cocoonset/sdk/go/cocoonset"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")
		namespace := cfg.Get("namespace")
		if namespace == "" {
			namespace = "agents"
		}
		createNamespace, err := cfg.TryBool("createNamespace")
		if err != nil {
			createNamespace = true
		}
		replicas, err := cfg.TryInt("replicas")
		if err != nil {
			replicas = 3
		}
		image := cfg.Get("image")
		if image == "" {
			image = "agents/coder:1"
		}

		operatorArgs := &cocoonset.OperatorArgs{
			Namespace:       pulumi.StringPtr(namespace),
			CreateNamespace: pulumi.BoolPtr(createNamespace),
		}
		if registry := cfg.Get("ociRegistry"); registry != "" {
			operatorArgs.OciRegistry = pulumi.StringPtr(registry)
		}
		operator, err := cocoonset.NewOperator(ctx, "cocoonset", operatorArgs)
		if err != nil {
			return err
		}

		fleet, err := cocoonset.NewFleet(ctx, "agents", &cocoonset.FleetArgs{
			Namespace: operator.Namespace,
			Operator:  operator,
			Spec: cocoonset.CocoonSetSpecArgs{
				Agent: cocoonset.AgentSpecArgs{
					Replicas: pulumi.IntPtr(replicas),
					Image:    pulumi.String(image),
				},
				Toolboxes: cocoonset.ToolboxSpecArray{
					cocoonset.ToolboxSpecArgs{
						Name:  pulumi.String("browser"),
						Image: pulumi.StringPtr("tools/browser:1"),
					},
				},
			},
		})
		if err != nil {
			return err
		}

		ctx.Export("cocoonSet", fleet.CocoonSetName)
		ctx.Export("pods", fleet.PodNames)
		return nil
	})
}
