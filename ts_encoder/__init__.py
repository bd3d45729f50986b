"""ts_encoder package of stockr1."""
