#!/usr/bin/env python3
"""Instructions per step, by source file, from two callgrind runs of the same bench.

Usage: callgrind_by_file.py SHORT.out LONG.out STEPS [PREFIX]

SHORT.out and LONG.out are callgrind outputs of `DECIDE_COUNT=<impl>:<n>:<a>` and `:<b>`
(b > a) with the same bench executable; STEPS is b - a. Each source line's own cost
(inlined code is counted at its own file and line, which callgrind records as `fi=`/`fe=`)
is subtracted, divided by STEPS, and summed per file, so the warm-up cancels out. Build the
bench with line tables (`CARGO_PROFILE_BENCH_DEBUG=line-tables-only`) so the lines are known.
PREFIX, if given, is cut from the file names. See docs/performance.md.
"""
import collections
import re
import sys

NAMED = re.compile(r"(\w+)=\((\d+)\)(?: (.*))?")


def own_cost_by_line(path):
    cost = collections.Counter()
    names = {}
    obj_file = current = None
    after_calls = False
    last = 0
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            m = NAMED.match(line)
            if m:
                key, ident, name = m.groups()
                if name:
                    names[(key in ("fl", "fi", "fe", "cfi", "cfl"), ident)] = name
                if key == "fl":
                    obj_file = current = names[(True, ident)]
                elif key in ("fi", "fe"):
                    current = names[(True, ident)]
                elif key == "fn":
                    current = obj_file
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            if line[0].isdigit() or line[0] in "+-*":
                fields = line.split()
                pos = fields[0]
                if pos.startswith("+"):
                    last += int(pos[1:])
                elif pos.startswith("-"):
                    last -= int(pos[1:])
                elif pos != "*":
                    last = int(pos)
                if after_calls:
                    # The line after `calls=` is the call's inclusive cost, not own cost.
                    after_calls = False
                    continue
                cost[(current, last)] += int(fields[1]) if len(fields) > 1 else 0
    return cost


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    short, long_ = own_cost_by_line(sys.argv[1]), own_cost_by_line(sys.argv[2])
    steps = float(sys.argv[3])
    prefix = sys.argv[4] if len(sys.argv) > 4 else ""
    by_file = collections.Counter()
    for key in set(short) | set(long_):
        name = (key[0] or "?").replace(prefix, "")
        by_file[name] += (long_[key] - short[key]) / steps
    print(f"{sum(by_file.values()):10.1f}  total")
    for name, per_step in by_file.most_common():
        if abs(per_step) >= 0.5:
            print(f"{per_step:10.1f}  {name}")


if __name__ == "__main__":
    main()
