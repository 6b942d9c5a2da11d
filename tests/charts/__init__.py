"""Tests of the Helm chart, its values schema, RBAC, alert rules and dashboards (static)."""
