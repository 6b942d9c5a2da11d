// Command coredns is CoreDNS with the plugins the dev cluster's Corefile uses and nothing else: the cluster's
// names from the API (kubernetes), health and readiness endpoints, a cache, errors and query logs. No forward
// plugin: names outside the cluster are not resolved (nothing in the dev cluster may reach another network).
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
