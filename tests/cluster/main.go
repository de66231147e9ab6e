// Command gpufleet-cluster is one multi-call binary holding the pieces of the local
// control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and
// helm. One binary keeps the build cache to a single link of the shared Kubernetes
// packages; each component still runs as its own process because they all register
// global flags and signal handlers that would collide inside one process.
//
// Usage: gpufleet-cluster <component> [flags...]   (or a symlink named after the component)
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zones, as upstream kube-apiserver and controller-manager do

	"github.com/spf13/pflag"
	etcdmain "go.etcd.io/etcd/server/v3/etcdmain"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

var components = map[string]func() int{
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kwok":                    runKwok,
	"helm":                    runHelm,
}

// freshCommandLine drops the flags that linked-in Kubernetes packages registered on
// pflag.CommandLine at init (verflag's non-bool --version above all): cobra merges that
// set into every root command, and kwok's cobra refuses to run with a non-bool --version.
func freshCommandLine() {
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
}

// runKwok mirrors sigs.k8s.io/kwok/cmd/kwok/main.go.
func runKwok() int {
	freshCommandLine()
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}
	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

// runHelm mirrors helm.sh/helm/v4/cmd/helm/helm.go.
func runHelm() int {
	freshCommandLine()
	helmkube.ManagedFieldsManager = "helm"
	command, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	if err := command.Execute(); err != nil {
		var cerr helmcmd.CommandError
		if errors.As(err, &cerr) {
			return cerr.ExitCode
		}
		return 1
	}
	return 0
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok {
		if len(os.Args) < 2 {
			usage()
			os.Exit(2)
		}
		// Shift so every component sees os.Args[0] as its own name, as its upstream main does.
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := components[name]
	if !ok {
		usage()
		os.Exit(2)
	}
	os.Exit(run())
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: gpufleet-cluster <component> [flags]\ncomponents: %v\n", names)
}
