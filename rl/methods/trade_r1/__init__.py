"""Trade-R1 (Sun et al., 2026) on the shared stack: retrieval, triangular judge, reward gates."""
