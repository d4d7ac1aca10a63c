"""TenantPlatform operator: prepares a cluster for a namespace-scoped, multi-tenant AI platform."""

__version__ = "0.2.0"
