"""The atheris entry point both targets share: corednstw instrumented,
the seed corpus written when no corpus directory is given."""

import os
import sys

import atheris


def fuzz(kind, argv):
    """Run libFuzzer on target ``kind`` ('packets' or 'corefiles') with
    its command-line flags (-runs=N, -seed=N, corpus directories)."""
    with atheris.instrument_imports(include=["corednstw"]):
        from fuzz import seeds, targets
    targets.quiet_log()
    if kind == "packets":
        target, corpus = targets.PacketTarget(), seeds.packets
    else:
        target, corpus = targets.CorefileTarget(), seeds.corefiles
    args = list(argv)
    if not any(not a.startswith("-") for a in args[1:]):
        directory = os.path.join(targets.HERE, "corpus", kind)
        seeds.write(directory, corpus())
        args.append(directory)
    atheris.Setup(args, target.run)
    try:
        atheris.Fuzz()
    finally:
        target.close()


def main(kind):
    fuzz(kind, sys.argv)
