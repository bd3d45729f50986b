"""Context providers: each turns a source into the stamped tables PointInTimeStore queries.

- macro: ``dict[name, MacroSeries]`` (observation-dated values + release rule)
- fundamentals: a DataFrame with ``ticker, period_end, filed`` (NaT when unknown) and STATEMENT_ITEMS
- news: a DataFrame with ``ticker`` ("" = market-wide), ``time`` (exchange-local, tz-naive),
  ``title``, ``summary``, ``sentiment``
- profiles: ``dict[ticker, Profile]`` (undated descriptive text only)
"""
