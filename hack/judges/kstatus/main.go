// Command kstatus is a test judge: it prints what Flux and kpt compute for Kubernetes objects.
//
// Input (stdin): a JSON array of objects, as the API server returns them.
// Output (stdout): a JSON array, one entry per object, in input order:
//
//	{"kstatus":     {"status": ..., "message": ...},  // sigs.k8s.io/cli-utils status.Compute (kpt, kubectl-style tools)
//	 "fluxKstatus": {"status": ..., "message": ...},  // github.com/fluxcd/cli-utils status.Compute (Flux's fork, for healthChecks)
//	 "fluxCEL":     {"status": ..., "message": ...}}  // Flux's healthCheckExprs status reader (only with -health-check-exprs)
//
// -health-check-exprs takes a JSON array of Flux Kustomization spec.healthCheckExprs entries
// ({apiVersion, kind, current, inProgress, failed}); the objects are then also read by the
// status reader kustomize-controller builds from them (github.com/fluxcd/pkg/runtime/cel).
// A verdict that cannot be computed is {"status": "Error", "message": <the error>}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	fluxstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type result struct {
	Kstatus     verdict  `json:"kstatus"`
	FluxKstatus verdict  `json:"fluxKstatus"`
	FluxCEL     *verdict `json:"fluxCEL,omitempty"`
}

func fail(err error) verdict { return verdict{Status: "Error", Message: err.Error()} }

func main() {
	exprs := flag.String("health-check-exprs", "", "JSON array of Flux healthCheckExprs entries")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *exprs); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus judge:", err)
		os.Exit(2)
	}
}

func run(in io.Reader, out io.Writer, exprs string) error {
	var objects []map[string]any
	dec := json.NewDecoder(in)
	dec.UseNumber()
	if err := dec.Decode(&objects); err != nil {
		return fmt.Errorf("stdin is not a JSON array of objects: %w", err)
	}
	var celReader func(*unstructured.Unstructured) verdict
	if exprs != "" {
		var checks []kustomize.CustomHealthCheck
		if err := json.Unmarshal([]byte(exprs), &checks); err != nil {
			return fmt.Errorf("-health-check-exprs is not a JSON array of healthCheckExprs entries: %w", err)
		}
		factory, err := fluxcel.NewStatusReader(checks)
		if err != nil {
			return err
		}
		statusReader := factory(nil) // no RESTMapper: objects are given, not looked up
		celReader = func(u *unstructured.Unstructured) verdict {
			res, err := statusReader.ReadStatusForObject(context.Background(), nil, u)
			if err != nil {
				return fail(err)
			}
			if res.Error != nil {
				return fail(res.Error)
			}
			return verdict{Status: res.Status.String(), Message: res.Message}
		}
	}
	results := make([]result, 0, len(objects))
	for _, obj := range objects {
		u := &unstructured.Unstructured{Object: normalize(obj).(map[string]any)}
		var r result
		if res, err := status.Compute(u); err != nil {
			r.Kstatus = fail(err)
		} else {
			r.Kstatus = verdict{Status: res.Status.String(), Message: res.Message}
		}
		if res, err := fluxstatus.Compute(u); err != nil {
			r.FluxKstatus = fail(err)
		} else {
			r.FluxKstatus = verdict{Status: res.Status.String(), Message: res.Message}
		}
		if celReader != nil {
			v := celReader(u)
			r.FluxCEL = &v
		}
		results = append(results, r)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// normalize turns json.Number into int64 (or float64), as client-go's unstructured decoding does,
// so that NestedInt64 reads generation and observedGeneration as the controllers do.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, item := range t {
			t[k] = normalize(item)
		}
		return t
	case []any:
		for i, item := range t {
			t[i] = normalize(item)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}
