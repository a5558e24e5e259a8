#!/bin/sh
# make check: run every step's --check, then the bad-input tests; count the
# PASS/FAIL/SKIP lines and end with "check: X passed, Y failed, Z skipped".
# A step that exits 77 (no GPU, or built without CUDA) counts as one skip;
# a step that dies by a signal or with a code other than 0/1/77 is a failure.
pass=0 fail=0 skip=0
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
for s in "$@"; do
    echo "== ./$s --check"
    ./"$s" --check >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); k=$(grep -c '^SKIP ' "$log")
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + k))
    case $rc in
        0) [ "$f" -eq 0 ] || { echo "FAIL $s: exit 0 with $f FAIL lines"; fail=$((fail + 1)); } ;;
        1) [ "$f" -gt 0 ] || { echo "FAIL $s: exit 1 without a FAIL line"; fail=$((fail + 1)); } ;;
        77) [ "$k" -gt 0 ] || { skip=$((skip + 1)); } ;;
        *) echo "FAIL $s --check: exit code $rc (signal or crash)"; fail=$((fail + 1)) ;;
    esac
done
echo "== bad input (each must exit 2 with one line on stderr)"
sh common/bad_input.sh >"$log" 2>&1
cat "$log"
pass=$((pass + $(grep -c '^PASS ' "$log"))); fail=$((fail + $(grep -c '^FAIL ' "$log")))
echo "== the timer's check (common/timer_check.sh against a stand-in ./step05: it must pass a steady timer and fail a broken one)"
sh common/timer_check_test.sh >"$log" 2>&1
cat "$log"
pass=$((pass + $(grep -c '^PASS ' "$log"))); fail=$((fail + $(grep -c '^FAIL ' "$log")))
echo "== the kernel ladder (make idea: every kernel extends the kernel its registry entry names, and shows code of its own)"
sh 05_cuda_fused/host/idea.sh --check >"$log" 2>&1
cat "$log"
pass=$((pass + $(grep -c '^PASS ' "$log"))); fail=$((fail + $(grep -c '^FAIL ' "$log")))
echo "== the lessons' figures (plots/lesson.py: every generated table, output and number the READMEs quote, against its data)"
if command -v "${PYTHON:-python3}" >/dev/null 2>&1; then
    "${PYTHON:-python3}" plots/lesson.py --check >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    pass=$((pass + p)); fail=$((fail + f))
    [ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || { echo "FAIL lesson: plots/lesson.py --check exited $rc without a FAIL line"; fail=$((fail + 1)); }
else
    echo "SKIP lesson: no python3 here to regenerate the lessons' figures"; skip=$((skip + 1))
fi
echo "check: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
