"""IFBench constraints (filled in below)."""
