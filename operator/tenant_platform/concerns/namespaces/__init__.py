"""The namespaces concern (docs/architecture.md)."""
