"""Seeded synthetic tasks for the embedded tiny model: one module per domain, pools in `pools.py`, rows in
`cascade_cli.data.tiny_tasks`."""
