"""One package per checklist concern (docs/architecture.md): its verdict (pure evaluate), its
manifests (pure render, templates beside them) and its step (gather, apply). Concerns are
independent of one another; what they share lives in core/ (pure) and framework/ (I/O)."""
