"""rl package of stockr1."""
