"""`stockr1 bench compare` (Stock-R1 vs Trading-R1 vs Trade-R1 vs AlphaQuanter): ``command`` runs the methods,
``config`` parses its YAML, ``plots`` writes the table, metrics and figures, ``sections`` the README sections read
from ``run_info.json``."""
