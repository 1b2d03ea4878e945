"""Writes orders.jsonl: 10 flat extraction tasks (an order line: id, item, quantity, unit price,
currency, paid) with their gold answers, in the DeepJSONEval row shape, for the convergence
benchmark's `TASKS=flat` (with people.jsonl). Deterministic: rerunning writes the same file.
The schema is examples/order/schema.json. The texts write prices the way people do ("€77.08",
"$1,204.50", "12.99 GBP") and say "paid" in words, so a model that copies them as text gives
strings where the schema asks for numbers and booleans.
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = json.loads((HERE.parent.parent / "examples" / "order" / "schema.json").read_text())

ITEMS = ["blue mugs", "desk lamps", "oak chairs", "wool blankets", "steel bolts", "paper notebooks", "glass vases",
         "leather belts", "cotton towels", "brass hinges"]
CURRENCIES = [("EUR", "€{p}", "{p} euros"), ("USD", "${p}", "{p} US dollars"), ("GBP", "£{p}", "{p} GBP")]
TEMPLATES = [
    "Order {oid}: {qty} {item} at {price} each, {paid_text}.",
    "{oid} - customer ordered {qty} {item}; unit price {price}. Payment: {paid_text}.",
    "We shipped {qty} {item} (order {oid}) priced at {price} apiece, and the invoice is {paid_text}.",
    "Invoice for order {oid}: {item} x{qty}, {price} per unit; {paid_text}.",
    "Order {oid} covers {qty} {item}. Each costs {price}. Status: {paid_text}.",
]


def price_text(value, currency, style):
    symbol, words = currency[1], currency[2]
    p = f"{value:,.2f}"
    return symbol.format(p=p) if style == 0 else words.format(p=p)


def main():
    rng = random.Random(11)
    rows = []
    for i in range(10):
        oid = f"{'ABCDEFGHJK'[i]}-{rng.randint(1000, 9999)}"
        qty = rng.randint(2, 40)
        cents = rng.choice([rng.randint(150, 9999), rng.randint(100000, 250000)])
        value = cents / 100
        currency = CURRENCIES[i % len(CURRENCIES)]
        paid = i % 3 != 0
        paid_text = rng.choice(["paid", "already paid", "paid in full"]) if paid else rng.choice(
            ["not paid yet", "unpaid", "payment pending"])
        text = TEMPLATES[i % len(TEMPLATES)].format(oid=oid, qty=qty, item=ITEMS[i], price=price_text(value, currency, i % 2),
                                                    paid_text=paid_text)
        rows.append({"id": f"orders-{i:04d}", "source": "bench/tasks/make_orders.py", "category": "order",
                     "depth": 1, "language": "en", "schema": SCHEMA, "text": text,
                     "expected": {"order_id": oid, "item": ITEMS[i], "quantity": qty, "unit_price": value,
                                  "currency": currency[0], "paid": paid}})
    with open(HERE / "orders.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
