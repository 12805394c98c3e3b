"""A tiny inventory module: the sample project the Crystal tour works on."""

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int


def total_value(items: list[Item]) -> float:
    """The value of everything in stock."""
    total = 0.0
    for item in items:
        total += item.price
    return round(total, 2)


def low_stock(items: list[Item], threshold: int = 3) -> list[str]:
    """Names of the items that should be reordered."""
    return sorted(item.name for item in items if item.quantity < threshold)
