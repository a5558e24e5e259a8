#!/bin/sh
# make check, on any machine: common/timer_check.sh judged against a stand-in for ./step05 that writes the times this
# test chooses into its --csv, so that the check's verdicts are seen to pass and to fail without a GPU:
#   steady   the planted delay moves only the idle timer's times      -> 4 rows PASS, exit 0
#   leak     it moves the busy timer's too (the timer broken)          -> 4 rows FAIL, exit 1
#   nan      every time is nan                                         -> 4 rows FAIL, exit 1
#   missing  no run writes a time                                      -> 4 rows FAIL, exit 1
# One PASS or FAIL line per case.
check=$(cd "$(dirname "$0")" && pwd)/timer_check.sh
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
# The stand-in: each family's CSV row with the time in the column timer_check.sh reads (forward and backward 10, decode
# 12, FP8 9); the time is 0.185, or 0.240 where the case says the planted delay shows.
cat >"$dir/step05" <<'EOF'
#!/bin/sh
csv="" prev=""
for a in "$@"; do [ "$prev" = --csv ] && csv=$a; prev=$a; done
[ -n "$csv" ] || exit 0
t=0.185
[ "${FA_PLANT_HOST_DELAY_US:-0}" = 50 ] && { [ "${FA_TIMER:-busy}" = idle ] || [ "$CASE" = leak ]; } && t=0.240
[ "$CASE" = nan ] && t=nan
[ "$CASE" = missing ] && exit 0
case "$*" in
*--decode*) echo "default,13,k,fp16,1,32,32,4096,128,1,64,$t,0,0" >"$csv" ;;
*--backward*) echo "bench_backward,fp16,12,k,32,32,512,64,0,$t,1" >"$csv" ;;
*fp8*) echo "bench,fp8,24,k,32,16,512,128,$t,1" >"$csv" ;;
*) echo "bench,fp16,23,k,32,32,512,64,0,$t,1" >"$csv" ;;
esac
EOF
chmod +x "$dir/step05"
for case in steady leak nan missing; do
    out=$(cd "$dir" && CASE=$case sh "$check" 2>&1)
    rc=$?
    p=$(echo "$out" | grep -c '^    PASS') f=$(echo "$out" | grep -c '^    FAIL')
    [ "$case" = steady ] && want="0 4 0" || want="1 0 4"      # exit code, PASS rows, FAIL rows
    [ "$rc $p $f" = "$want" ] && verdict=PASS || verdict=FAIL
    echo "$verdict timer_check/$case: want exit, PASS rows, FAIL rows = $want; got $rc $p $f"
done
