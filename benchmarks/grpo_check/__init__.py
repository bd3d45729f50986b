"""`stockr1 bench grpo_check`: does GRPO raise the reward of its own training queries? ``command`` trains and
probes, ``report`` writes the README and figure."""
