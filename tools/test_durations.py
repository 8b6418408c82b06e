"""The suite's durations, kept and checked (called by tools/test.sh after its two passes).

Reads the JUnit XML files the passes wrote (``bench-results/tests-<pass>.xml``), prints each
pass's test count, wall time and summed test time, and the slowest tests of all; writes them
to ``bench-results/test-durations.json``; names every test that took more than ``--limit-s``
seconds (setup, call and teardown together: a scenario that long belongs in ``pathweave
bench``, with a short form in the suite), and exits 1 when a test took more than ``--fail-s``
(or, with ``--enforce``, more than ``--limit-s``). Usage:
``python tools/test_durations.py bench-results/tests-arcadedb.xml bench-results/tests-neo4j.xml``
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

LIMIT_S = 120.0
"""The longest a single test may take (s): a test over it is named."""
FAIL_S = 180.0
"""A test over this (s) fails the suite in any case: the ceiling while the last test over
:data:`LIMIT_S` (the soak's short form, whose time varies with the machine) is shortened."""


def read(path: Path) -> dict:
    """One pass: ``{name, tests, wall_s, tests_s, cases: [(test id, seconds)]}``."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = [(f"{case.get('classname', '')}::{case.get('name', '')}", float(case.get("time") or 0.0))
             for suite in suites for case in suite.iter("testcase")]
    return {"name": path.stem.removeprefix("tests-"), "tests": len(cases),
            "wall_s": round(sum(float(suite.get("time") or 0.0) for suite in suites), 1),
            "tests_s": round(sum(seconds for _, seconds in cases), 1), "cases": cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--limit-s", type=float, default=LIMIT_S)
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--fail-s", type=float, default=FAIL_S, help="exit 1 when a test took longer than this")
    parser.add_argument("--enforce", action="store_true", help="exit 1 when a test is over --limit-s")
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "test-durations.json")
    args = parser.parse_args(argv)
    passes = [read(path) for path in args.reports if path.is_file()]
    if not passes:
        print("test durations: no JUnit report found", file=sys.stderr)
        return 1
    slowest = sorted(((seconds, p["name"], case) for p in passes for case, seconds in p["cases"]), reverse=True)
    print("== test durations")
    for p in passes:
        print(f"{p['name']}: {p['tests']} tests, {p['wall_s'] / 60:.1f} min wall ({p['tests_s']:.0f} s in tests)")
    print(f"both passes: {sum(p['wall_s'] for p in passes) / 60:.1f} min")
    for seconds, name, case in slowest[:args.slowest]:
        print(f"{seconds:8.1f} s  {name:9}  {case}")
    over = [(seconds, name, case) for seconds, name, case in slowest if seconds > args.limit_s]
    ceiling = args.limit_s if args.enforce else max(args.limit_s, args.fail_s)  # never below the limit
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"limit_s": args.limit_s, "fail_s": ceiling, "passes": [
        {key: value for key, value in p.items() if key != "cases"} for p in passes],
        "slowest": [{"seconds": s, "pass": n, "test": c} for s, n, c in slowest[:args.slowest]]}, indent=2))
    for seconds, name, case in over:
        failed = seconds > ceiling
        print(f"{'FAILED' if failed else 'OVER'} test duration: {case} ({name}) took {seconds:.0f} s, over "
              f"{ceiling if failed else args.limit_s:.0f} s", file=sys.stderr)
    return 1 if any(seconds > ceiling for seconds, _, _ in over) else 0


if __name__ == "__main__":
    sys.exit(main())
