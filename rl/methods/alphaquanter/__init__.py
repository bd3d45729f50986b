"""AlphaQuanter (2025) on the shared stack: point-in-time tools, outcome/process rewards, backtest."""
