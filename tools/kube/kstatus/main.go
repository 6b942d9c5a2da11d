// kstatus: the status sigs.k8s.io/cli-utils/pkg/kstatus computes for each object of a Kubernetes list read from
// stdin (`kubectl get ... -o json`), printed as JSON lines {"name", "status", "message"}. Built by
// tools/kube/build.sh; the tests hold the operator's Trials, campaigns and ScoringRuns to the rules Flux, Argo CD
// and kpt read them by. Nothing here is imported by the product.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: reading stdin:", err)
		os.Exit(2)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(data); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus: stdin is not a Kubernetes list (kubectl get ... -o json):", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for i := range list.Items {
		item := &list.Items[i]
		result, err := status.Compute(item)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %s: %v\n", item.GetName(), err)
			os.Exit(1)
		}
		if err := out.Encode(verdict{item.GetName(), result.Status.String(), result.Message}); err != nil {
			os.Exit(1)
		}
	}
}
