#!/bin/sh
# run_suite.sh BIN REPORT [ARGS...]: runs the Criterion suite BIN with ARGS, writing its JSON report
# to REPORT, and gives the suite's verdict. Criterion's exit status 0 passes. Any other status is
# checked against the report (tests/tools/test_verdict.py): Criterion 2.4.1 has exited 1 after
# runs whose every test passed, so a run fails on a failed, errored or unreported test, not on the
# status alone.
bin=$1
report=$2
shift 2
rm -f "$report"  # a report from an earlier run must not stand for this one
expected=$("$bin" --list 2>/dev/null | grep -c '[├└]')
"$bin" --json="$report" "$@" && exit 0
status=$?
exec python3 "$(dirname "$0")/test_verdict.py" "$report" "$status" "$expected"
