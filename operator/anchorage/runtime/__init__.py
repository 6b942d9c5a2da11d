"""Where trials run: the local sandbox runner, and pure builders of Kubernetes manifests."""
