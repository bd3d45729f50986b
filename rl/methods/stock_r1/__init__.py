"""Stock-R1's glue for side-by-side runs. Stock-R1 itself is this project's main stack (``llm``,
``rl.cli``, ``forecast_action``); this package only holds what ``stockr1 bench compare`` needs to
put it next to the sibling methods, so every method's glue lives under ``rl/methods/<method>/``."""
