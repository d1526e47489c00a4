"""Helpers shared by the tests: plain functions and constants (fixtures live in ``conftest.py`` files).

No module here is a test module or a conftest; test modules import helpers only from here, never from one
another (``tests/test_test_layout.py`` checks).
"""
