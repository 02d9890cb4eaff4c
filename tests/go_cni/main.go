// A CNI client built on Debian's go-cni (golang-github-containerd-go-cni-dev), calling plugins
// exactly as containerd's CRI does: tests/go_cni.rs builds it with `go build` and runs it.
//
//	gocni <add|check|del|del-unusable> <conf dir> <plugin dir> <container id> <netns path>
//
// add, check and del pass the capabilities containerd's CRI passes for a pod with a hostPort,
// DNS settings, bandwidth limits and annotations; add prints go-cni's Result as JSON.
// del-unusable passes a port mapping no plugin can use (host port 0) to DEL.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	gocni "github.com/containerd/go-cni"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: gocni <add|check|del|del-unusable> <conf dir> <plugin dir> <container id> <netns path>")
		os.Exit(2)
	}
	verb, confDir, pluginDir, id, netns := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	cni, err := gocni.New(
		gocni.WithMinNetworkCount(1),
		gocni.WithPluginConfDir(confDir),
		gocni.WithPluginDir([]string{pluginDir}),
		gocni.WithInterfacePrefix("eth"),
	)
	if err != nil {
		fail("new", err)
	}
	if err := cni.Load(gocni.WithDefaultConf); err != nil {
		fail("load", err)
	}
	port := gocni.PortMapping{HostPort: 8090, ContainerPort: 80, Protocol: "tcp"}
	if verb == "del-unusable" {
		port.HostPort = 0
	}
	opts := []gocni.NamespaceOpts{
		gocni.WithLabels(map[string]string{
			"K8S_POD_NAMESPACE": "default",
			"K8S_POD_NAME":      "web",
			"K8S_POD_UID":       "7b0c3d2e-0000-4000-8000-000000000001",
		}),
		gocni.WithCapabilityPortMap([]gocni.PortMapping{port}),
		gocni.WithCapabilityDNS(gocni.DNS{
			Servers:  []string{"10.96.0.10"},
			Searches: []string{"default.svc.cluster.local"},
			Options:  []string{"ndots:5"},
		}),
		gocni.WithCapabilityBandWidth(gocni.BandWidth{IngressRate: 10000000, IngressBurst: 1000000}),
		gocni.WithCapability("io.kubernetes.cri.pod-annotations", map[string]string{
			"kubernetes.io/ingress-bandwidth": "10M",
			"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\"}",
		}),
	}
	ctx := context.Background()
	switch verb {
	case "add":
		result, err := cni.Setup(ctx, id, netns, opts...)
		if err != nil {
			fail("setup", err)
		}
		out, err := json.Marshal(result)
		if err != nil {
			fail("marshal", err)
		}
		fmt.Println(string(out))
	case "check":
		if err := cni.Check(ctx, id, netns, opts...); err != nil {
			fail("check", err)
		}
	case "del", "del-unusable":
		if err := cni.Remove(ctx, id, netns, opts...); err != nil {
			fail("remove", err)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown verb %q\n", verb)
		os.Exit(2)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}
