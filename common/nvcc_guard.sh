#!/bin/sh
# nvcc_guard.sh NVCC ARGS...: run the compile with ptxas's -v (the Makefile adds it) and stop on what only -v shows.
# ptxas reports a Hopper kernel it had to compile slower than written only as an info line under -v, which --Werror
# does not see: its wgmma serialised (C7510-C7519, "Potential Performance Loss: wgmma.mma_async instructions are
# serialized due to ..."; every product then waits for the one before it, the overlap the kernel was written for
# gone) or its setmaxnreg ignored (C7508). Those lines fail the build; the lines about a warpgroup.arrive or wait the
# compiler injected are shown; the rest of -v's output (registers, stack, spills of every function) is dropped;
# everything else nvcc says is passed on as it was, with its exit status.
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
trap 'exit 130' INT TERM
"$@" 2>"$log"
rc=$?
grep -v -e '^ptxas info' -e '^ *[0-9]* bytes stack frame' "$log" >&2
grep -e 'is injected' "$log" >&2
if grep -q 'Potential Performance Loss' "$log"; then
    grep 'Potential Performance Loss' "$log" >&2
    echo "nvcc_guard: ptxas compiled a kernel slower than written (the lines above): the build stops here" >&2
    rc=1
fi
exit $rc
