"""A plain mutation loop with a fixed seed: the same inputs on every run.

It needs no instrumentation (the suite runs it where atheris is not
installed) and makes the kinds of change libFuzzer makes: bit flips,
interesting bytes, inserted, removed and repeated ranges, splices of two
seeds, and for Corefiles tokens of the grammar (braces, quotes, escapes,
imports, snippets, environment variables).
"""

import random
import sys
import time

#: Byte values at the edges of DNS fields (label lengths, pointers, counts).
INTERESTING = (0, 1, 0x3F, 0x40, 0x7F, 0x80, 0xC0, 0xFE, 0xFF)

#: Pieces of the Corefile grammar worth inserting whole.
TOKENS = (b"{", b"}", b"{\n", b"\n}\n", b'"', b"\\", b"\n", b" ", b"#",
          b"import ", b"(snip)", b"import snip", b"{$HOME}", b"{$", b"`",
          b".:53", b"dns://", b"tls://", b"https://", b"grpc://",
          b"example.org", b"10.0.0.0/8", b"::1", b":0", b":65536",
          b"*", b"-1", b"0", b"99999999999999999999", b"1s", b"24h",
          b"fallthrough", b"cache", b"forward . 127.0.0.1", b"file",
          b"rewrite", b"template", b"hosts", b"acl", b"view", b"bind",
          b"log", b"errors", b"reload", b"timeouts", b"kubernetes",
          b"dnssec", b"sign", b"auto", b"secondary", b"transfer", b"tsig",
          b"metadata", b"prometheus", b"health", b"ready", b"\x00",
          b"\xff", "\u00e9".encode())


class Mutator:
    """Inputs derived from ``seeds`` by a ``random.Random(seed)``."""

    def __init__(self, seeds, seed=0, tokens=False, max_len=4096):
        self.seeds = [bytes(s) for s in seeds] or [b""]
        self.rng = random.Random(seed)
        self.tokens = tokens
        self.max_len = max_len

    def next(self):
        rng = self.rng
        data = bytearray(rng.choice(self.seeds))
        for _ in range(rng.randint(1, 4)):
            self._mutate(data)
        return bytes(data[:self.max_len])

    def _mutate(self, data):
        rng = self.rng
        ops = [self._flip, self._byte, self._insert, self._delete,
               self._repeat, self._splice]
        if self.tokens:
            ops += [self._token, self._token]
        rng.choice(ops)(data)

    def _pos(self, data, extra=0):
        return self.rng.randint(0, max(0, len(data) - 1 + extra))

    def _flip(self, data):
        if data:
            data[self._pos(data)] ^= 1 << self.rng.randint(0, 7)

    def _byte(self, data):
        if data:
            data[self._pos(data)] = self.rng.choice(INTERESTING)

    def _insert(self, data):
        n = self.rng.randint(1, 8)
        at = self._pos(data, 1)
        data[at:at] = bytes(self.rng.randint(0, 255) for _ in range(n))

    def _delete(self, data):
        if data:
            at = self._pos(data)
            del data[at:at + self.rng.randint(1, 16)]

    def _repeat(self, data):
        if data:
            at = self._pos(data)
            chunk = data[at:at + self.rng.randint(1, 32)]
            data[at:at] = chunk * self.rng.randint(1, 4)

    def _splice(self, data):
        other = self.rng.choice(self.seeds)
        if other:
            at = self._pos(data, 1)
            start = self.rng.randint(0, len(other) - 1)
            data[at:] = other[start:]

    def _token(self, data):
        at = self._pos(data, 1)
        data[at:at] = self.rng.choice(TOKENS)


def run(target, seeds, count, seed=0, tokens=False):
    """Feed the seeds, then ``count`` mutants, to ``target.run``; returns
    (inputs run, seconds).  The first input that breaks a property
    raises, with the input attached as ``exc.fuzz_input``."""
    gen = Mutator(seeds, seed, tokens)
    start = time.monotonic()
    n = 0
    for data in _inputs(seeds, gen, count):
        try:
            target.run(data)
        except Exception as e:
            e.fuzz_input = data
            raise
        n += 1
    return n, time.monotonic() - start


def _inputs(seeds, gen, count):
    yield from seeds
    for _ in range(count):
        yield gen.next()


def main(argv):
    """``python -m fuzz.mutate packets|corefiles N [SEED]``: the loop
    without atheris; prints the figures."""
    from fuzz import seeds as seedmod
    from fuzz import targets
    kind, count = argv[1], int(argv[2])
    seed = int(argv[3]) if len(argv) > 3 else 0
    targets.quiet_log()
    if kind == "packets":
        target, corpus, tokens = (targets.PacketTarget(),
                                  seedmod.packets(), False)
    else:
        target, corpus, tokens = (targets.CorefileTarget(),
                                  seedmod.corefiles(), True)
    try:
        n, secs = run(target, corpus, count, seed, tokens)
    finally:
        target.close()
    print("%s: %d inputs in %.1fs (%.0f/s), no finding"
          % (kind, n, secs, n / secs if secs else 0.0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
