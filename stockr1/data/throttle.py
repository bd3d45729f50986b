"""Polite, retried remote calls (Yahoo): one ``Requests`` policy shared by every call of a build.

Why: Yahoo rate-limits bursts (HTTP 429, or empty frames that look like delisted tickers), and a
503-ticker build makes ~2,000 calls (history, info, three statements, news). Each call waits until
at least ``min_interval`` seconds have passed since the previous one started (``Throttle``), and a
failed call is retried with exponential backoff (``backoff * 2**attempt``). The clock and the sleep
are injected so tests check the spacing without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


class DataFetchError(RuntimeError):
    """A remote call that still failed after its retries (the message names the ticker and the call)."""


@dataclass
class Throttle:
    """At least ``min_interval`` seconds between the starts of consecutive calls."""

    min_interval: float = 0.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _last: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_interval < 0:
            raise ValueError(f"min_interval must be >= 0 seconds, got {self.min_interval}")

    def wait(self) -> None:
        """Sleep until the next call may start, then mark it as started."""
        if self._last is not None and self.min_interval > 0:
            gap = self._last + self.min_interval - self.clock()
            if gap > 0:
                self.sleep(gap)
        self._last = self.clock()


@dataclass
class Requests:
    """Retries, backoff and throttle of a build's remote calls."""

    retries: int = 4
    backoff: float = 2.0
    throttle: Throttle = field(default_factory=Throttle)
    sleep: Callable[[float], None] = time.sleep

    def call(self, fn: Callable[[], T], what: str) -> T:
        """``fn()`` throttled, retried ``retries`` times; raises DataFetchError naming ``what``."""
        for attempt in range(self.retries + 1):
            self.throttle.wait()
            try:
                return fn()
            except Exception as e:  # noqa: BLE001 - yfinance raises many types; retry, then report
                if attempt == self.retries:
                    raise DataFetchError(f"{what}: {type(e).__name__}: {e} (after {self.retries} retries)") from e
                self.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")


def requests_policy(min_interval: float = 0.0, retries: int = 4, backoff: float = 2.0,
                    sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> Requests:
    """One policy whose throttle and backoff share ``sleep`` (and the throttle ``clock``)."""
    return Requests(retries, backoff, Throttle(min_interval, clock, sleep), sleep)
