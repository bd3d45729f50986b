"""`stockr1 bench ablation` (Stock-R1 Table 3): ``command`` trains and evaluates the rows, ``summary`` computes
the intervals and verdicts, ``report`` writes the README, ``plots`` the figures."""
