// Command registry is CNCF Distribution's registry with the filesystem storage driver only (the dev cluster keeps
// its images in the cache; no cloud drivers, so none of their SDKs is built).
package main

import (
	"fmt"
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
