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
echo "== the watchdog (a kernel that never ends must end its program with a FAIL line and exit 1, not hang it)"
# FA_PLANT_HANG=1 (common/gpu.cu) makes a program's first wait on the GPU wait behind a kernel that spins for ten
# deadlines (20 s): the watchdog must end the program at its 2 s deadline with its FAIL line. timeout is the guard of
# the guard: a broken watchdog must not hang make check either.
# watchdog NAME PATTERN COMMAND...: COMMAND with the plant must exit 1 within 15 s, a FAIL line matching PATTERN.
watchdog() {
    name=$1 pattern=$2; shift 2
    t0=$(date +%s)
    FA_WATCHDOG_S=2 FA_PLANT_HANG=1 timeout 120 "$@" >"$log" 2>&1
    rc=$? t=$(( $(date +%s) - t0 ))
    if [ "$rc" -eq 77 ]; then
        echo "SKIP $name: no CUDA device (or no CUDA in this build)"; skip=$((skip + 1))
    elif [ "$rc" -eq 1 ] && grep -q "$pattern" "$log" && [ "$t" -lt 15 ]; then
        echo "PASS $name: a kernel planted to spin for 20 s under a 2 s deadline ended $* after $t s, exit 1: $(grep '^FAIL watchdog: ' "$log" | cut -c 6-90)..."
        pass=$((pass + 1))
    else
        echo "FAIL $name: a kernel planted to spin for 20 s under a 2 s deadline: $* exited $rc after $t s, $(grep -c "$pattern" "$log") lines matching $pattern"
        fail=$((fail + 1))
    fi
}
watchdog watchdog '^FAIL watchdog: ' ./step05 --check --kernel 1
# step 06's model (06_causal/gpt_gpu.cu): its first wait is the model's upload, its own CUDA_WAITED: the line names it
watchdog watchdog-step06 "^FAIL watchdog: the model's " ./step06 --train --device gpu --steps 1
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
