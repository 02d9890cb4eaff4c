// A CNI client on Debian's libcni (golang-github-appc-cni-dev), the library containerd's go-cni
// and CRI-O call plugins with: testkit/src/libcni.rs builds it with `go build`, and
// benches/perf.rs times knid-cni's ADD and DEL through it.
//
//	libcni-cycles <conflist> <plugin dir> <cache dir>
//
// Reads one "<container id> <netns path>" per line from stdin; for each, runs AddNetworkList
// then DelNetworkList (libcni's cached result as DEL's prevResult, as a runtime's DEL after a
// restart) and writes "<ADD ns> <DEL ns>", or "error <what>" when either failed, one line each.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: libcni-cycles <conflist> <plugin dir> <cache dir>")
		os.Exit(2)
	}
	list, err := libcni.ConfListFromFile(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "conflist: %v\n", err)
		os.Exit(1)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{os.Args[2]}, os.Args[3], nil)
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) != 2 {
			fmt.Fprintf(out, "error line %q: want <container id> <netns path>\n", in.Text())
			continue
		}
		rt := &libcni.RuntimeConf{
			ContainerID: fields[0],
			NetNS:       fields[1],
			IfName:      "eth0",
			Args: [][2]string{
				{"IgnoreUnknown", "1"},
				{"K8S_POD_NAMESPACE", "bench"},
				{"K8S_POD_NAME", fields[0]},
			},
		}
		started := time.Now()
		_, addErr := cni.AddNetworkList(ctx, list, rt)
		add := time.Since(started)
		started = time.Now()
		delErr := cni.DelNetworkList(ctx, list, rt)
		del := time.Since(started)
		switch {
		case addErr != nil:
			fmt.Fprintf(out, "error ADD of %s: %s\n", fields[0], oneLine(addErr))
		case delErr != nil:
			fmt.Fprintf(out, "error DEL of %s: %s\n", fields[0], oneLine(delErr))
		default:
			fmt.Fprintf(out, "%d %d\n", add.Nanoseconds(), del.Nanoseconds())
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(out, "error stdin: %s\n", oneLine(err))
	}
}

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
