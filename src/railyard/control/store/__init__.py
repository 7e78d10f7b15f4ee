"""The durable store: schema, migrations, opening it, compare-and-set writes, bulk writes."""
