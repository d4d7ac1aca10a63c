"""PURE parsers of third-party formats the operator reads and edits: CoreDNS's Corefile, and
HAMi's annotations and configuration (``formats.hami``). They know nothing of TenantPlatforms."""
