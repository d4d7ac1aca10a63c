"""The edgecert concern (docs/architecture.md)."""
