"""Fuzz targets for the packet path and the Corefile parser.

``targets`` holds the properties checked for one input (shared by the
atheris entry points and the suite's short deterministic run), ``seeds``
the corpus built from the tests' queries and Corefiles, ``mutate`` a plain
seeded mutation loop.  ``python -m fuzz.packets`` and ``python -m
fuzz.corefiles`` run atheris; ``fuzz/run.sh`` runs both with the figures
of docs/limits.md.
"""
