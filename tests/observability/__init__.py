"""End-to-end observability: a real Prometheus scrapes the gateway and the local engine."""
