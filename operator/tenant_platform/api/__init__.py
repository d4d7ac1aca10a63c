"""The TenantPlatform API: pydantic models of the CRD and the constants every layer shares."""
