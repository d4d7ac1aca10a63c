"""The only code that imports the Kubernetes client. Everything here takes and returns plain dicts."""
