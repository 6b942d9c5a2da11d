// Command registry is CNCF Distribution's registry with the filesystem storage driver only (the dev cluster keeps
// its images in the cache; no cloud drivers, so none of their SDKs is built) and htpasswd authentication (a registry
// that asks for credentials, for the tests of pull secrets). `registry htpasswd USER` prints the htpasswd line of USER
// with the password read from stdin (bcrypt, the only hash the htpasswd access controller accepts).
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
)

var htpasswdCmd = &cobra.Command{
	Use:   "htpasswd USER",
	Short: "print USER's htpasswd line (bcrypt) for the password on stdin",
	Args:  cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		password, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		hash, err := bcrypt.GenerateFromPassword(bytes.TrimRight(password, "\r\n"), bcrypt.DefaultCost)
		if err != nil {
			return err
		}
		fmt.Printf("%s:%s\n", args[0], hash)
		return nil
	},
}

func main() {
	registry.RootCmd.AddCommand(htpasswdCmd)
	if err := registry.RootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
