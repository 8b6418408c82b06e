"""tools/test_durations.py, the suite's duration check: a test over the 120 s limit is named, one
over the ceiling fails the suite, and with --enforce the limit itself fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "test_durations.py"


def check(tmp_path: Path, seconds: float, *args: str) -> subprocess.CompletedProcess:
    report = tmp_path / "tests-arcadedb.xml"
    report.write_text(f'<testsuites><testsuite name="pytest" time="{seconds + 1}">'
                      f'<testcase classname="tests.test_x" name="test_fast" time="1.0"/>'
                      f'<testcase classname="tests.test_x" name="test_long" time="{seconds}"/>'
                      f'</testsuite></testsuites>')
    return subprocess.run([sys.executable, str(TOOL), str(report), "--out", str(tmp_path / "d.json"), *args],
                          capture_output=True, text=True)


def test_a_test_over_the_limit_is_named_and_one_over_the_ceiling_fails(tmp_path):
    under = check(tmp_path, 100.0)
    assert under.returncode == 0 and "OVER" not in under.stderr and "tests.test_x::test_long" in under.stdout
    over = check(tmp_path, 130.0)
    assert over.returncode == 0 and "OVER test duration: tests.test_x::test_long (arcadedb) took 130 s" in over.stderr
    failed = check(tmp_path, 200.0)
    assert failed.returncode == 1 and "FAILED test duration" in failed.stderr and "over 180 s" in failed.stderr
    enforced = check(tmp_path, 130.0, "--enforce")
    assert enforced.returncode == 1 and "over 120 s" in enforced.stderr
