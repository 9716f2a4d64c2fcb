"""``python -m fuzz.packets [libFuzzer flags] [corpus]``: queries through
the whole chain (see targets.PacketTarget)."""

from fuzz._atheris import main

if __name__ == "__main__":
    main("packets")
