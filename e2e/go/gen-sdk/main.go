// Command gen-sdk writes the Node.js SDK of a Pulumi component package from its schema, as `pulumi package add`
// does for a TypeScript project: the same generator (pkg/codegen/nodejs.GeneratePackage, which the Node.js
// language host calls) with the same options (a local SDK, SupportPack on). Only the generator is needed, not the
// language host, so the TypeScript example can be type-checked and run under Pulumi's mock runtime without it.
//
//	gen-sdk SCHEMA_JSON OUT_DIR
//
// OUT_DIR is replaced by the SDK (package.json, *.ts, scripts/postinstall.js, tsconfig.json).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// noDependencies is the loader of a package that references no other package (our components' schema has no
// `dependencies`): any lookup is an error that names the package asked for, instead of a plugin download.
type noDependencies struct{}

func (noDependencies) refuse(name string) error {
	return fmt.Errorf("the schema references package %q; gen-sdk generates only packages without dependencies", name)
}

func (l noDependencies) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, l.refuse(pkg)
}

func (l noDependencies) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, l.refuse(d.Name)
}

func (l noDependencies) LoadPackageReference(pkg string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, l.refuse(pkg)
}

func (l noDependencies) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return nil, l.refuse(d.Name)
}

func generate(schemaPath, out string) error {
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", schemaPath, err)
	}
	loader := noDependencies{}
	// As `pulumi package add` binds it (pkg/cmd/pulumi/packages.BindSpec).
	pkg, diags, err := schema.BindSpec(spec, loader, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return fmt.Errorf("%s: %w", schemaPath, err)
	}
	if diags.HasErrors() {
		return fmt.Errorf("%s: %w", schemaPath, errors.Join(diags.Errs()...))
	}
	// `pulumi package add` always sets SupportPack, and asks the language host for a local SDK (compiled by its
	// own postinstall script when npm installs it).
	pkg.SupportPack = true
	files, err := nodejs.GeneratePackage("pulumi-language-nodejs", pkg, nil, nil, true, loader)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gen-sdk SCHEMA_JSON OUT_DIR")
		os.Exit(2)
	}
	if err := generate(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk: %v\n", err)
		os.Exit(1)
	}
}
