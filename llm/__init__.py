"""llm package of stockr1."""
