"""Recipes: one YAML for a whole cascade; load + merge + overrides, interpolation, plan, and the runner with
its manifest and resume."""
