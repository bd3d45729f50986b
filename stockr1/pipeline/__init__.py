"""The end-to-end pipeline behind ``stockr1 demo`` (see docs/pipeline.md).

runner.py  generic stage runner: run dir, ``.done`` markers, skip / resume / --only / --from / --fresh
invoke.py  calls a stage's CLI (in-process or as a subprocess), tees its log
stages.py  the demo's stages, each driving the CLI a user would call with configs/demo.yaml's budget
report.py  ``<run>/report.md``
demo.py    ``stockr1 demo`` argument parsing and the run manifest
"""

from stockr1.pipeline.demo import main
from stockr1.pipeline.runner import Stage, StageContext, StageInputError, StageResult, StageRunner

__all__ = ["Stage", "StageContext", "StageInputError", "StageResult", "StageRunner", "main"]
