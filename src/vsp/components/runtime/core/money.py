"""Money as people read it: every amount with its currency, every rate per hour.

Prices in this project are in US dollars (the shipped price table, price files, and the price
parameters all say USD), so every amount shown to a user carries ``USD``.
"""

from __future__ import annotations

CURRENCY = "USD"


def amount(value: float, places: int = 2) -> str:
    """``56.57 USD``."""
    return f"{value:.{places}f} {CURRENCY}"


def per_hour(value: float, places: int = 2) -> str:
    """``159.67 USD/h``."""
    return f"{value:.{places}f} {CURRENCY}/h"
