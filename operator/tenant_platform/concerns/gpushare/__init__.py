"""The GPU share concern: a ResourceQuota on HAMi's resources per platform namespace (docs/gpu.md)."""
