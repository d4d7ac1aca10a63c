"""The apiaddresses concern (docs/architecture.md)."""
