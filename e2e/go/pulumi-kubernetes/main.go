// The main package of github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes, whose
// embedded files e2e.toolchain generates at build time (see go.mod).
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
