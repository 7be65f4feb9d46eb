"""sluice: a Kubernetes-native queue manager for multi-tenant batch and AI clusters."""

__version__ = "0.1.0"
