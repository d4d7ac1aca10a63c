"""PURE rendering: (platform, observed facts) -> manifests as plain dicts.

No I/O, no clock, no randomness, stable order. jinja2 templates live in render/templates/ and are
parsed here with yaml.safe_load, so no template text leaves the package.
"""
