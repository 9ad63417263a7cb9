"""Test-time scaling (Nemotron-Cascade §5.1, App. C.3, §7.4): `code.py` multi-round submissions for
competitive programming, `swe.py` best@k for SWE repair, `select.py` the Tail-10 pick, `problems.py` public
vs hidden tests and feedback prompts, `sampling.py` the local engine as a sampler."""
