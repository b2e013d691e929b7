#!/usr/bin/env python3
"""The suite's verdict from Criterion's JSON report, for a run whose exit status was not 0.

    test_verdict.py REPORT.json STATUS EXPECTED

Criterion 2.4.1 has exited 1 after a run whose every test passed ("Tested: 518 | Passing: 518 |
Failing: 0 | Crashing: 0"), twice in clean-clone runs of 2026-12-02, once in three; the same
binary passed alone. Its exit status then says nothing about the tests, so the verdict is read
from the report it wrote: the run fails when any test failed or errored, when the report is
missing or cut short, or when it holds fewer tests than the binary lists (EXPECTED); otherwise it
passes, saying why the exit status was overruled.
"""
import json
import sys


def main() -> int:
    path, status, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"test_verdict: the test binary exited {status} and its report {path} cannot be read: {e}")
        return 1
    counts = {k: int(report.get(k, 0)) for k in ("passed", "failed", "errored", "skipped")}
    total = sum(counts.values())
    if counts["failed"] or counts["errored"]:
        bad = [f"{s['name']}::{t['name']} ({t['status']})" for s in report.get("test_suites", [])
               for t in s.get("tests", []) if t.get("status") in ("FAILED", "ERRORED")]
        print(f"test_verdict: {counts['failed']} failed, {counts['errored']} errored: " + ", ".join(bad))
        return 1
    if total < expected:
        print(f"test_verdict: the report holds {total} tests of the {expected} the binary lists: some never reported")
        return 1
    print(f"test_verdict: the test binary exited {status}, but its report shows all {total} tests accounted for "
          f"({counts['passed']} passed, {counts['skipped']} skipped, none failed or errored): passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
