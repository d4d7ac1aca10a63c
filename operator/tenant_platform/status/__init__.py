"""PURE status computation: conditions, the Ready summary, GPU capacity. No I/O, no clock."""
