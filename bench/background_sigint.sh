#!/bin/sh
# The four tests that SIGINT a child, started the way a script starts a background job (`cmd &`, which
# leaves SIGINT ignored: POSIX, job control off), with two busy loops beside them, ROUNDS times.
#
#     sudo bench/background_sigint.sh [ROUNDS] [suite]   (default 3; prints one line per round and a summary)
#
# With `suite`, each round is the whole `make test` (the linter, the workers step, the machine step) instead of
# the four tests: the suite's figure for a loaded machine, started the way a script starts it.
#
# Each round checks that the pytest process really started with SIGINT ignored (SigIgn in /proc), so the
# figure says something about the tests (tests/conftest.py::default_sigint), not about how it was started.
set -u
rounds=${1:-3}
what=${2:-signal}
cd "$(dirname "$0")/.." || exit 2
tests="tests/test_parallel.py::test_signal_stops_every_testbed_and_keeps_what_is_recorded[SIGINT]
tests/faults/test_testbed_faults.py::test_signal_during_setup_tears_down_and_logs_the_reason
tests/faults/test_testbed_faults.py::test_started_with_sigint_ignored_mplab_keeps_ignoring_it_and_stops_on_sigterm
tests/test_controller_steering.py::test_controller_serve_steers_and_caps_a_real_switch_from_an_inventory_and_stops_on_sigint"
busy() { while :; do :; done; }
busy & b1=$!
busy & b2=$!
pid=
# Stopped (SIGTERM, or SIGINT where it is not ignored): the busy loops and the round under way go too.
trap 'kill $b1 $b2 ${pid:+$pid} 2>/dev/null' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
log=$(mktemp -d /tmp/mplab-bench-sigint-XXXXXX)
failed=0
start=$(date +%s)
i=0
while [ "$i" -lt "$rounds" ]; do
  i=$((i + 1))
  t0=$(date +%s)
  if [ "$what" = suite ]; then
    # make's exit status is the round's; pytest runs as make's grandchild and inherits the ignored SIGINT.
    make test PYTEST_ARGS="-q -p no:cacheprovider" > "$log/round-$i.txt" 2>&1 &
  else
    # shellcheck disable=SC2086
    .venv/bin/python -m pytest -q -p no:cacheprovider $tests > "$log/round-$i.txt" 2>&1 &
  fi
  pid=$!
  sleep 0.5
  ign=$(awk '/^SigIgn/ {print $2}' "/proc/$pid/status" 2>/dev/null)
  wait "$pid"
  rc=$?
  # SIGINT is signal 2: bit 1 of the SigIgn mask.
  ignored=$(python3 -c "print('yes' if int('${ign:-0}', 16) & 2 else 'no')")
  summary=$(grep -E "(passed|failed|error)[^|]* in [0-9.]+s" "$log/round-$i.txt" | tr '\n' ' ')
  echo "round $i: exit $rc, $(( $(date +%s) - t0 )) s, started with SIGINT ignored: $ignored; $summary"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
done
echo "rounds: $rounds, failed: $failed, wall: $(( $(date +%s) - start )) s, logs: $log"
[ "$failed" -eq 0 ]
