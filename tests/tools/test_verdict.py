#!/usr/bin/env python3
"""The suite's verdict from Criterion's JSON report, for a run whose exit status was not 0.

    test_verdict.py REPORT.json STATUS EXPECTED

Criterion 2.4.1 has exited 1 after a run whose every test passed ("Tested: 518 | Passing: 518 |
Failing: 0 | Crashing: 0"), twice in clean-clone runs of 2026-12-02, once in three; the same
binary passed alone. Its exit status then says nothing about the tests, so the verdict is read
from the report it wrote: the run fails when any test failed or errored, when the report is
missing or cut short, or when it holds fewer tests than the binary lists (EXPECTED); otherwise it
passes, saying why the exit status was overruled.

Criterion 2.4.1 writes a failed assertion's message into the report unescaped: a quote or a tab
in it (`the string "saved" is not in stdout`) made the report unreadable, and the verdict could
not name the test that failed. Its messages stand one per line in a "messages" array, so each
such line is escaped again before the report is read (repair_messages).

    test_verdict.py --self-test      checks repair_messages on a report Criterion wrote
"""
import json
import re
import sys

MESSAGE_LINE = re.compile(r'^(\s*)"(.*)"(,?)$')


def repair_messages(text: str) -> str:
    """The report with every line of a "messages" array made a JSON string again."""
    out, in_messages = [], False
    for line in text.split("\n"):
        stripped = line.strip()
        if in_messages and stripped in ("]", "],"):
            in_messages = False
        elif in_messages:
            m = MESSAGE_LINE.match(line)
            if m:
                line = m.group(1) + json.dumps(m.group(2)) + m.group(3)
        elif stripped == '"messages": [':
            in_messages = True
        out.append(line)
    return "\n".join(out)


def read_report(path: str):
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(repair_messages(text))


SAMPLE = """{
  "passed": 1,
  "failed": 1,
  "test_suites": [
    {
      "name": "s",
      "tests": [
        {
          "name": "bad",
          "status": "FAILED",
          "messages": [
            "crt.c:2: the string "x" is not in",
            "  line two\tq"
          ]
        }
      ]
    }
  ]
}"""


def self_test() -> int:
    report = json.loads(repair_messages(SAMPLE))
    messages = report["test_suites"][0]["tests"][0]["messages"]
    assert messages == ['crt.c:2: the string "x" is not in', "  line two\tq"], messages
    assert repair_messages('{"a": "b"}') == '{"a": "b"}'
    print("test_verdict: self-test passed (a report with unescaped messages is read)")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    path, status, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        report = read_report(path)
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
