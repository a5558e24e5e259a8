#!/bin/sh
# step07_grade_numpy.sh [DIR]: step 07's grader on a real student, step07_student.py (NumPy), one grade per mistake it
# can make, then the autograder's results file, files saved wrong, and the two usage errors. From the repository
# root after `make step07`:
#   sh plots/record.sh plots/gallery/step07_grade_numpy.txt -- sh plots/gallery/step07_grade_numpy.sh
# keeps the transcript that 07_break_it/EXERCISES.md quotes. Each command is printed as typed ("$ ..."), then its
# standard output, then its standard error (each line marked "(stderr)"), then "(exit N)".
set -u
d=${1:-/tmp/step07-grade}
s=plots/gallery/step07_student.py
run() {
    echo "\$ $1"
    sh -c "$1" 2>"$d.stderr"
    rc=$?
    sed 's/^/(stderr) /' "$d.stderr"
    echo "(exit $rc)"
}
rm -rf "$d" "$d.stderr"
run "./step07 --assignment $d"
for mode in fixed chapter float64 no-max no-max-float64 no-rescale max-zero max-zero-float64 max-minus-10000 first-max \
            p-before-max-float64 relative-mask drop-last drop-last-rows pad no-scale no-division fp16 alibi-relative \
            alibi-after-max diagonal; do
    run "python3 $s $d $mode && ./step07 --grade $d"
done
run "python3 $s $d no-rescale && ./step07 --grade $d --json $d/results.json"
run "cat $d/results.json"
run "python3 $s $d bad-files && ./step07 --grade $d --json $d/results.json"
run "cat $d/results.json"
run "./step07 --grade $d/no-such-dir --json $d/results.json"
run "cat $d/results.json"
run "./step07 --grade $d --json $d/no-such-dir/results.json"
rm -f "$d.stderr"
