"""Where trials run: ``local`` (the local sandbox runner), ``kube`` (what the operator builds for Kubernetes and what
runs in its pods) and ``seccomp_policy`` (the agent's system-call policy, which both use)."""
