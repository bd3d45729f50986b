"""The baseline interface (``base.Baseline``: ``fit(train, val=None) -> self``, ``predict(windows,
n_samples, seed) -> Forecast``), the shared step from sampled close paths to a ``Forecast``, and the
simple baselines every forecaster must beat (``simple``: random walk, historical drift; ``ewma``:
RiskMetrics EWMA volatility). They need
only the core, so the TS encoder's report uses them; ``benchmarks.baselines`` adds the classical
and neural ones.
"""
