"""What every step uses: the step contract and context (``base``), the write gate, the helpers
for owned children, the probes several steps share, and the one status writer."""
