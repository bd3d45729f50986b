"""forecast_action package of stockr1."""
