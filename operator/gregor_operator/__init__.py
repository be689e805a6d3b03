"""Gregor's Kubernetes operator: kopf handlers over pure planners (docs/operator.md)."""
