// Command cert-manager is a test judge: cert-manager's own controllers (github.com/cert-manager/cert-manager,
// pinned in go.mod), run as one local process against an API server, without the webhook.
//
// Upstream's binary (cmd/controller) is a separate module that the module proxy does not serve
// (its go.mod replaces the root module with a relative path), so this program does what its
// app.Run does with the controllers a self-signed or CA Issuer needs, all from the root module:
// issuers and clusterissuers, the CertificateRequest approver and its selfsigned and ca signers,
// and the Certificate controllers (trigger, keymanager, requestmanager, issuing, readiness,
// revisionmanager). ACME, Vault, Venafi, the ingress/gateway shims and the CSR signers are left
// out (no webhook either: the tests write valid objects).
//
//	cert-manager --kubeconfig PATH [--namespace NS] [--cluster-resource-namespace NS] [-v N]
//
// Runs until SIGINT or SIGTERM. tests/integration/test_certmanager.py runs it against the test
// control plane, with cert-manager's CRDs that hack/build-tools.sh copies from the module source.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to run against")
	namespace := flag.String("namespace", "", "watch one namespace only (default: all)")
	clusterResources := flag.String("cluster-resource-namespace", "kube-system",
		"where ClusterIssuers' Secrets live (upstream's --cluster-resource-namespace)")
	workers := flag.Int("workers", 2, "workers per controller")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "cert-manager: --kubeconfig is required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *namespace, *clusterResources, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, clusterResources string, workers int) error {
	root, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root = logf.NewContext(root, klog.Background(), "cert-manager-judge")
	log := logf.FromContext(root)

	factory, err := controller.NewContextFactory(root, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		Namespace:          namespace,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResources},
		CertificateOptions: controller.CertificateOptions{
			// upstream's defaults (1h, 32h) would stall a test after one failure
			CertificateRequestMinimumBackoffDuration: 5 * time.Second,
			CertificateRequestMaximumBackoffDuration: 30 * time.Second,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	names := make([]string, 0, len(controller.Known()))
	for name := range controller.Known() {
		if namespace != "" && name == clusterissuers.ControllerName {
			continue // upstream skips cluster-scoped controllers when scoped to a namespace
		}
		names = append(names, name)
	}
	sort.Strings(names)

	g, ctx := errgroup.WithContext(root)
	for _, name := range names {
		iface, err := controller.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return iface.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	log.Info("started controllers", "controllers", names)
	fmt.Fprintf(os.Stderr, "cert-manager judge: started %v\n", names)
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
