"""The API of sluice: the Queue resource, views of Kubernetes objects, quantities, configuration."""
