// Command protogen generates the Go code of the protocol definitions under
// proto/ without protoc: it compiles the .proto files with
// github.com/bufbuild/protocompile (pure Go) and runs the protoc plugins
// protoc-gen-go and protoc-gen-go-grpc, pinned in this module's go.mod as
// tools, on the result. With -check it writes nothing and fails when the
// committed code differs from what it would generate.
//
// Run it from the repository root with `make generate`, or here with
// `go run . -root ../..`.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// files are the .proto files to generate, relative to <root>/proto.
var files = []string{"stratus/provider/v1/provider.proto"}

// plugins are the protoc plugins run on them (go tool names), all with
// paths=source_relative so that the Go files land next to their .proto file.
var plugins = []string{"protoc-gen-go", "protoc-gen-go-grpc"}

func main() {
	root := flag.String("root", "../..", "the repository root")
	check := flag.Bool("check", false, "fail when the committed generated code is stale instead of writing it")
	flag.Parse()
	if err := run(context.Background(), *root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, root string, check bool) error {
	protoDir := filepath.Join(root, "proto")
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{protoDir}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(ctx, files...)
	if err != nil {
		return fmt.Errorf("compile %v: %w", files, err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files, Parameter: proto.String("paths=source_relative")}
	seen := map[string]bool{}
	for _, f := range compiled {
		addWithImports(req, f, seen)
	}
	var stale []string
	for _, plugin := range plugins {
		out, err := runPlugin(ctx, plugin, req)
		if err != nil {
			return err
		}
		for _, f := range out {
			path := filepath.Join(protoDir, f.GetName())
			if check {
				have, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(have, []byte(f.GetContent())) {
					stale = append(stale, path)
				}
				continue
			}
			if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
				return err
			}
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("generated code is stale, run make generate: %v", stale)
	}
	return nil
}

// addWithImports adds f after its imports, as protoc orders ProtoFile.
func addWithImports(req *pluginpb.CodeGeneratorRequest, f protoreflect.FileDescriptor, seen map[string]bool) {
	if seen[f.Path()] {
		return
	}
	seen[f.Path()] = true
	imports := f.Imports()
	for i := range imports.Len() {
		addWithImports(req, imports.Get(i).FileDescriptor, seen)
	}
	req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
	if slices.Contains(req.FileToGenerate, f.Path()) {
		req.SourceFileDescriptors = append(req.SourceFileDescriptors, proto.Clone(protodesc.ToFileDescriptorProto(f)).(*descriptorpb.FileDescriptorProto))
	}
}

// runPlugin runs one protoc plugin, pinned as a tool of this module, on req.
func runPlugin(ctx context.Context, plugin string, req *pluginpb.CodeGeneratorRequest) ([]*pluginpb.CodeGeneratorResponse_File, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "tool", plugin)
	cmd.Dir = moduleDir()
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run %s: %w: %s", plugin, err, stderr.String())
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("read %s's response: %w", plugin, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s: %s", plugin, resp.GetError())
	}
	if len(resp.File) == 0 {
		return nil, errors.New(plugin + " generated nothing")
	}
	return resp.File, nil
}

// moduleDir is this module's directory, where `go tool` finds the pinned
// plugins: the working directory, as make generate and the test run it.
func moduleDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	return dir
}
