"""The podguard concern (docs/architecture.md)."""
