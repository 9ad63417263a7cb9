"""Data: sources, formats (normalizers to the canonical row), the prepare pipeline, the data card, filters
(decontamination, disjointness, pass rate), constraint synthesis and the tiny model's synthetic tasks."""
