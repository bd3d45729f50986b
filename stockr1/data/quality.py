"""Data-quality checks: every problem is reported with ticker and date, and is either an error or a
documented, counted repair -- never a silent drop.

| kind               | detected when                                          | handling                          |
|--------------------|--------------------------------------------------------|-----------------------------------|
| duplicate_date     | a date appears twice with identical values             | repair: keep one row              |
| duplicate_conflict | a date appears twice with different values             | error                             |
| no_close           | the close is NaN on every day                          | error                             |
| nan_row            | every present price is NaN (e.g. a holiday)            | repair: drop the row              |
| nan_price          | some but not all present prices are NaN                | error                             |
| nonpositive_price  | an O/H/L/C value <= 0, or a negative volume            | error                             |
| high_below_low     | high < low                                             | error                             |
| ohlc_envelope      | high < max(open, close) or low > min(open, close)      | repair: widen high/low to enclose |
| nan_volume         | volume NaN with valid prices                           | repair: previous day's volume     |
| zero_volume        | volume == 0                                            | repair: previous day's volume     |
| gap                | more than ``max_gap_weekdays`` weekdays missing        | reported (kept; returns span it)  |
| split_jump         | |close-to-close log return| > ln(``jump_ratio``) after | error (``jump_policy="report"``   |
|                    | adjusting for recorded splits/dividends               | keeps it, counted)                |

A channel that is NaN on every day of a ticker is *absent* (a close-only series: open, high, low or
volume missing from the source), not broken: it is left NaN and masked downstream
(``Windows.channels``); the checks above run over the present channels only. A present channel with
a NaN on some day is still an error (prices) or repaired (volume).

Zero volume is repaired because r^V = ln((V_d+1)/(V_{d-1}+1)) turns a 0 between two 1e9 days into
two +-21 outliers. One missing weekday is an exchange holiday and is not reported.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stockr1.data.adjust import action_log_factors

PRICES = ["open", "high", "low", "close"]


@dataclass(frozen=True)
class Issue:
    ticker: str
    date: str
    kind: str
    action: str  # "repaired" | "reported" | "error"
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.ticker} {self.date} {self.kind} ({self.action}): {self.detail}"


@dataclass
class QualityReport:
    issues: list[Issue] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.action == "error"]

    def counts(self) -> dict[str, int]:
        """{kind: count} over repaired and reported issues, sorted by kind."""
        c = Counter(i.kind for i in self.issues if i.action != "error")
        return dict(sorted(c.items()))


class DataQualityError(ValueError):
    def __init__(self, issues: list[Issue]):
        self.issues = issues
        shown = "\n  ".join(str(i) for i in issues[:20])
        more = f"\n  ... and {len(issues) - 20} more" if len(issues) > 20 else ""
        super().__init__(f"{len(issues)} data-quality error(s):\n  {shown}{more}")

    def one_line(self, k: int = 3) -> str:
        """The count and the first ``k`` errors on one line (for a command's error message)."""
        more = f" (+{len(self.issues) - k} more)" if len(self.issues) > k else ""
        return f"{len(self.issues)} data-quality error(s): " + "; ".join(map(str, self.issues[:k])) + more


def _day(d) -> str:
    return str(pd.Timestamp(d).date())


def check_frame(ticker: str, frame: pd.DataFrame, report: QualityReport, max_gap_weekdays: int = 1,
                jump_ratio: float = 1.8, jump_policy: str = "error") -> pd.DataFrame:
    """A repaired copy of ``frame``; issues are appended to ``report`` (errors are not raised here)."""
    add = report.issues.append
    f = frame.copy()
    dup = f.index.duplicated(keep=False)
    if dup.any():
        keep = np.ones(len(f), dtype=bool)
        for d in f.index[dup].unique():
            rows = f.loc[[d]]
            same = bool((rows.nunique(dropna=False) <= 1).all())
            add(Issue(ticker, _day(d), "duplicate_date" if same else "duplicate_conflict",
                      "repaired" if same else "error", f"{len(rows)} rows" + ("" if same else f": {rows.to_dict('records')}")))
            keep[np.flatnonzero(f.index == d)[1:]] = False
        f = f[keep]
    present = [c for c in PRICES if f[c].notna().any()]  # an absent channel is NaN on every day
    if "close" not in present:
        add(Issue(ticker, _day(f.index[0]) if len(f) else "", "no_close", "error", "the close is NaN on every day"))
        return f
    nan = f[present].isna()
    for d in f.index[nan.all(axis=1)]:
        add(Issue(ticker, _day(d), "nan_row", "repaired", "all prices NaN; row dropped"))
    for d in f.index[nan.any(axis=1) & ~nan.all(axis=1)]:
        add(Issue(ticker, _day(d), "nan_price", "error", f"partly NaN: {f.loc[d, PRICES].to_dict()}"))
    f = f[~nan.all(axis=1)]
    bad = (f[present] <= 0).any(axis=1) | (f["volume"] < 0)
    for d in f.index[bad]:
        add(Issue(ticker, _day(d), "nonpositive_price", "error", f"{f.loc[d, PRICES + ['volume']].to_dict()}"))
    inv = f["high"] < f["low"]
    for d in f.index[inv]:
        add(Issue(ticker, _day(d), "high_below_low", "error", f"high {f.at[d, 'high']} < low {f.at[d, 'low']}"))
    hi, lo = f[["open", "close"]].max(axis=1), f[["open", "close"]].min(axis=1)
    env = ~inv & ((f["high"] < hi) | (f["low"] > lo))
    for d in f.index[env]:
        add(Issue(ticker, _day(d), "ohlc_envelope", "repaired", f"high/low widened to enclose open/close {f.loc[d, PRICES].to_dict()}"))
    f.loc[env, "high"] = np.maximum(f.loc[env, "high"], hi[env])
    f.loc[env, "low"] = np.minimum(f.loc[env, "low"], lo[env])
    if f["volume"].notna().any():  # an absent volume stays NaN (masked downstream), never zero-filled
        for kind, mask in (("nan_volume", f["volume"].isna()), ("zero_volume", f["volume"] == 0)):
            for d in f.index[mask]:
                add(Issue(ticker, _day(d), kind, "repaired", "volume set to the previous day's"))
            f.loc[mask, "volume"] = np.nan
        f["volume"] = f["volume"].ffill().bfill().fillna(0.0)
    if len(f) > 1:
        idx = f.index
        missing = np.busday_count(idx[:-1].values.astype("datetime64[D]"), idx[1:].values.astype("datetime64[D]")) - 1
        for k in np.flatnonzero(missing > max_gap_weekdays):
            add(Issue(ticker, _day(idx[k + 1]), "gap", "reported", f"{missing[k]} weekdays missing after {_day(idx[k])}"))
        if not f[present].isna().any().any() and (f[present] > 0).all().all():
            log_f, _ = action_log_factors(f)
            r = np.diff(np.log(f["close"].to_numpy())) - log_f[1:]
            for k in np.flatnonzero(np.abs(r) > np.log(jump_ratio)):
                add(Issue(ticker, _day(idx[k + 1]), "split_jump", "error" if jump_policy == "error" else "reported",
                          f"close {f['close'].iat[k]:.4g} -> {f['close'].iat[k + 1]:.4g} (x{np.exp(r[k]):.3f}) "
                          "without a recorded split; fix the source or pass jump_policy='report'"))
    return f


def check_frames(frames: dict[str, pd.DataFrame], raise_errors: bool = True, **kw) -> tuple[dict[str, pd.DataFrame], QualityReport]:
    """Check and repair every frame. Raises DataQualityError listing all errors (if ``raise_errors``)."""
    report = QualityReport()
    out = {t: check_frame(t, frames[t], report, **kw) for t in sorted(frames)}
    if raise_errors and report.errors:
        raise DataQualityError(report.errors)
    return out, report
