"""Turn trial's closing line into 'N passed, N failed[, N skipped]'.

``summary.py TRIAL_OUTPUT [CHECKS]``: CHECKS, when given, holds one line
per linter run ("ok NAME" or "FAILED NAME"), each counted as one test.
"""

import re
import sys


def main(path, checks=None):
    text = open(path, errors="replace").read()
    counts = {}
    for m in re.finditer(r"^(PASSED|FAILED) \(([^)]*)\)\s*$", text, re.M):
        counts = dict((k, int(v)) for k, v in
                      re.findall(r"(\w+)=(\d+)", m.group(2)))
    passed = counts.get("successes", 0) + counts.get("expectedFailures", 0)
    failed = (counts.get("failures", 0) + counts.get("errors", 0)
              + counts.get("unexpectedSuccesses", 0))
    if not counts and "Ran 0 tests" not in text:
        failed = max(failed, 1)  # trial did not finish: count as a failure
    if checks:
        for line in open(checks, errors="replace"):
            if line.startswith("ok "):
                passed += 1
            elif line.startswith("FAILED "):
                failed += 1
    skipped = counts.get("skips", 0)
    line = "%d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)


if __name__ == "__main__":
    main(*sys.argv[1:3])
