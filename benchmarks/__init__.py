"""asv benchmarks of the suite (``asv run``; configuration in ``asv.conf.json`` at the repository root).

Speed goals live here, not in timed unit tests; ``tests/test_benchmarks.py`` runs every benchmark once on a tiny
graph so that they cannot silently rot.
"""
