import unittest

from inventory import Item, low_stock, total_value

STOCK = [Item("bolt", 0.25, 100), Item("gear", 4.5, 2), Item("motor", 30.0, 1)]


class InventoryTest(unittest.TestCase):
    def test_total_value(self):
        self.assertEqual(total_value(STOCK), 64.0)

    def test_low_stock(self):
        self.assertEqual(low_stock(STOCK), ["gear", "motor"])


if __name__ == "__main__":
    unittest.main()
