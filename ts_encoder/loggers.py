"""``WandbLogger``: Lightning's, minus the ``anonymous=None`` it always hands to ``wandb.init``.

Why: wandb >= 0.23 removed anonymous mode and warns at every run start when the argument is given at
all, even as None (wandb/wandb#10909 names Lightning's logger as the caller). Everything else is
Lightning's; drop this class once Lightning stops passing the argument.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger


class WandbLogger(LightningWandbLogger):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:  # the only way in: Lightning builds the dict itself
            self._wandb_init.pop("anonymous", None)
