"""``python -m fuzz.corefiles [libFuzzer flags] [corpus]``: Corefile text
parsed and set up as --check does (see targets.CorefileTarget)."""

from fuzz._atheris import main

if __name__ == "__main__":
    main("corefiles")
