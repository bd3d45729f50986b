"""The forecaster benchmarks: ``command`` (`stockr1 bench forecast`, Table 2 on test), ``search``
(`stockr1 bench forecast_search`, the choice on validation) and ``report`` (their tables, README and figures)."""
