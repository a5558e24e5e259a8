#!/bin/sh
# idea.sh K: the one idea of kernel K, from the code (make idea K=12, make idea K=B5, make idea K=D3).
#
# Every kernel's registry entry, at the end of its file, names the kernel it extends: `.extends = 11`, the rung
# below it on its ladder (forward and FP8 kernels share one numbering: K=15 is fp8/kernel15_fp8.cu; B5 is
# backward/bwd05_wgmma.cu; D3 is decode/decode03_split_kv.cu). A kernel's file is one of two kinds:
#
#   a whole copy (kernels 1-13, 15, B1, B2, B5, D1, D2, ...): the file holds its whole kernel, and the idea is
#       what differs from the file it extends. Printed as a unified diff of the two files' code, compared without
#       comments, blank lines and changes of whitespace, names that only carry the kernel's number (K11_BR and
#       K12_BR, k11_launch) written with N; an added line is printed as it stands, with its comment and the
#       comment lines right above it (the code's own explanation). Launchers are left out (ALL=1 shows them).
#   a rung on a shared body (kernel 14 on, B3, B6, D3, ...): the file includes the file of the kernel it extends
#       (#include "kernel13_overlap.cu") and holds only its idea: a policy type that replaces some of its
#       predecessor's named hooks. Printed whole, from its first line of code to its launcher, with the hooks it
#       replaces and where the replaced ones are.
#
# A line that ends with "// aside" carries what a later step needs, not this kernel's idea (the backward's L,
# step 06's ALiBi): hidden from a diff and counted (ALL=1 shows it).
#
#     sh 05_cuda_fused/host/idea.sh 12        sh 05_cuda_fused/host/idea.sh B5
#     sh 05_cuda_fused/host/idea.sh --check   every kernel's rung, for make check (with a planted wrong one)
# Bad input: one line on stderr, exit 2.
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# file_of K: the source file of kernel K (12, B5, D3), empty if there is none
file_of() {
    case $1 in
        [Bb][0-9]*) n=${1#?}; set -- "$top"/backward/bwd ;;
        [Dd][0-9]*) n=${1#?}; set -- "$top"/decode/decode ;;
        *) n=$1; set -- "$top"/forward/kernel "$top"/fp8/kernel ;;
    esac
    case $n in ''|*[!0-9]*|0*) return 0 ;; esac
    for p in "$@"; do
        for f in "$p$(printf '%02d' "$n")"_*.cu; do [ -f "$f" ] && { echo "$f"; return 0; }; done
    done
}
# prefix FILE: how K names a kernel of FILE's family ("" for the forward and FP8, B, D)
prefix() { case $(basename "$1") in bwd*) echo B ;; decode*) echo D ;; *) echo ;; esac; }
label() {
    case $(basename "$1") in
        bwd*) echo "backward kernel $(number "$1")" ;; decode*) echo "decode kernel $(number "$1")" ;;
        *) case $1 in */fp8/*) echo "FP8 kernel $(number "$1")" ;; *) echo "kernel $(number "$1")" ;; esac ;;
    esac
}
number() { b=$(basename "$1"); b=${b#kernel}; b=${b#bwd}; b=${b#decode}; b=${b%%_*}; echo "${b#0}"; }
rel() { echo "${1#"$top"/}"; }
# the registry entry's fields
# (the entry's first line: "    .id = 23, .extends = 22, .name = ...")
field_n() { grep -E '^[[:space:]]*\.id = ' "$2" | sed -n "s/.*\.$1 = \([0-9][0-9]*\).*/\1/p"; }
idea_text() { sed -n 's/^[[:space:]]*\.idea = "\(.*\)",[[:space:]]*$/\1/p' "$1" | head -n 1; }
# included_rung FILE: the rung file FILE includes (a shared body's later rung), empty for a whole copy
included_rung() { sed -n 's/^#include "\(\(kernel\|bwd\|decode\)[0-9][0-9]_[A-Za-z0-9_]*\.cu\)".*/\1/p' "$1" | head -n 1; }

# code FILE NUMBER [PART]: the file with comments (and "(void)x;" lines) removed, one output line per input line (so
# that line numbers stay the file's), names carrying NUMBER written with N. PART: "kernel" (the default) blanks the
# lines from the "// --- the launcher" banner on, "launcher" the lines before it, "all" none.
code() {
    awk -v part="${3:-kernel}" -v keep_aside="$all" -v asides="$tmp/code.asides" '
    /^\/\/ --- the launcher/ { launcher = 1 }
    {
        out = ""; s = $0; i = 1; n = length(s); instr = 0; aside = 0
        while (i <= n) {
            c = substr(s, i, 1); c2 = substr(s, i, 2)
            if (inblock) { if (c2 == "*/") { inblock = 0; i += 2 } else i++; continue }
            if (instr) { out = out c; if (c == "\\") { out = out substr(s, i + 1, 1); i += 2; continue }
                         if (c == q) instr = 0; i++; continue }
            if (c2 == "/*") { inblock = 1; i += 2; continue }
            if (c2 == "//") { aside = substr(s, i) ~ /^\/\/[ \t]*aside([: \t]|$)/; break }
            if (c == "\"" || c == "\047") { instr = 1; q = c }
            out = out c; i++
        }
        sub(/[ \t]+$/, "", out)
        if ((part == "kernel" && launcher) || (part == "launcher" && !launcher)) out = ""
        if (out ~ /^[ \t]*\(void\)/) out = ""
        if (aside && out != "" && !keep_aside) { out = ""; hidden++ }
        print out
    }
    END { print hidden + 0 > asides }' "$1" >"$tmp/code"
    case $2 in ''|*[!0-9]*) cat "$tmp/code"; return ;; esac
    sed -e 's/^/ /' -e 's/$/ /' \
        -e "s/\([^A-Za-z0-9_]\)\([KkBb]\)$2\([^0-9]\)/\1\2N\3/g" \
        -e "s/\([^A-Za-z0-9_]\)\(kernel\)$2\([^0-9]\)/\1\2N\3/g" \
        -e "s/\([^A-Za-z0-9_]\)\(bwd\)$2\([^0-9]\)/\1\2N\3/g" \
        -e "s/\([^A-Za-z0-9_]\)\(decode\)$2\([^0-9]\)/\1\2N\3/g" \
        -e "s/\([^A-Za-z0-9_]\)\(dk\)$2\([^0-9]\)/\1\2N\3/g" \
        -e "s/\([^A-Za-z0-9_]\)\(Dec\)$2\([^0-9]\)/\1\2N\3/g" \
        -e 's/^ //' -e 's/ $//' "$tmp/code"
}
# compact OUT: the non-blank lines of stdin to OUT, and to OUT.map the line number each came from
compact() { awk -v out="$1" -v map="$1.map" 'NF { print > out; print NR > map }'; : >>"$1"; : >>"$1.map"; }
# changed DIFF: "ADDED REMOVED", the non-blank lines a diff adds and removes
changed() { awk '/^(\+\+\+|---) / { next } /^[+>][ \t]*[^ \t]/ { a++ } /^[-<][ \t]*[^ \t]/ { d++ } END { print a + 0, d + 0 }' "$1"; }

# show_diff A B NA NB: the unified diff of the code of files A and B (the kernels only unless $all), added lines
# printed as they stand in B with the comments above them; then how many lines it adds and removes
show_diff() {
    part=kernel; [ -n "$all" ] && part=all
    code "$1" "$3" "$part" | compact "$tmp/a"; code "$2" "$4" "$part" | compact "$tmp/b"
    hidden=$(cat "$tmp/code.asides")
    diff -b -U 1 "$tmp/a" "$tmp/b" >"$tmp/d"
    awk -v A="$(basename "$1")" -v B="$(basename "$2")" -v MA="$tmp/a.map" -v MB="$tmp/b.map" -v RAW="$2" '
        BEGIN { while ((getline l < MA) > 0) ma[++na] = l; while ((getline l < MB) > 0) mb[++nb] = l
                while ((getline l < RAW) > 0) raw[++nr] = l }
        function at(m, n, start, len) { if (len == 0) start++; if (start > n) start = n; return start > 0 ? m[start] : 1 }
        NR <= 2 { next }
        /^@@/ {
            split(substr($2, 2), a, ","); split(substr($3, 2), b, ",")
            if (!(2 in a)) a[2] = 1; if (!(2 in b)) b[2] = 1
            j = b[1] + (b[2] == 0)
            printf "@@ %s:%d %s:%d @@\n", A, at(ma, na, a[1], a[2]), B, at(mb, nb, b[1], b[2]); delete a; delete b; next
        }
        /^\+/ {
            if (j > 1 && j <= nb) {
                first = mb[j]
                while (first - 1 > mb[j - 1] && raw[first - 1] ~ /^[ \t]*(\/\/|\/\*|\*)/) first--
                for (k = first; k < mb[j]; k++) print "+" raw[k]
            }
            print (j <= nb ? "+" raw[mb[j]] : $0); j++; next
        }
        /^ / { j++ }
        { print }' "$tmp/d"
    counts=$(changed "$tmp/d") extra=
    if [ -z "$all" ]; then
        code "$1" "$3" launcher | compact "$tmp/a"; code "$2" "$4" launcher | compact "$tmp/b"
        diff -b "$tmp/a" "$tmp/b" >"$tmp/d"
        l=$(changed "$tmp/d")
        [ "$l" = "0 0" ] || extra="; their launchers, left out here: +${l% *} -${l#* } (ALL=1 shows them)"
    fi
    echo "(${counts% *} lines of code added, ${counts#* } removed$extra)"
    [ "${hidden:-0}" -eq 0 ] || echo "($hidden lines of $(basename "$2") end with '// aside': what a later step needs (the backward's L, the ALiBi modifier), not this idea; hidden here, ALL=1 shows them)"
}

# show_rung F P: a rung on a shared body: F's own lines from its first line of code after the includes to its
# launcher (ALL=1: to its end), numbered as in F; then the hooks it defines that a kernel below it defines too
show_rung() {
    awk -v all="$all" '
        /^\/\/ --- the launcher/ && !all { exit }
        !started && /^#include/ { next }
        !started && /^(#ifndef RUNG|#define RUNG|#endif)/ { next }
        !hdr && /^\/\*/ { inhdr = 1 }
        inhdr { if ($0 ~ /\*\//) { inhdr = 0; hdr = 1 } next }
        !started && /^[ \t]*$/ { next }
        { started = 1; printf "%s:%d: %s\n", FN, NR, $0 }' FN="$(basename "$1")" "$1" |
        awk '{ l[NR] = $0 } END { n = NR; while (n > 0 && l[n] ~ /^[^:]*:[0-9]+: *$/) n--; for (i = 1; i <= n; i++) print l[i] }' >"$tmp/rung"
    cat "$tmp/rung"
    code "$1" "" kernel | awk 'NF' >"$tmp/own"
    own=$(grep -c . "$tmp/own")
    # the names it defines (a function or a static member: "name(" at the start of a declaration) that an ancestor defines
    { sed -nE 's/^[[:space:]]*(template <[^>]*>[[:space:]]*)?((static|__device__|__host__|__forceinline__|inline|constexpr|const|unsigned|void|int|long|float|bool|uint32_t|uint64_t|size_t|auto)[[:space:]]+)+([A-Za-z_][A-Za-z0-9_:<>,]*[[:space:]*&]+)?([A-Za-z_][A-Za-z0-9_]*)\(.*/\5/p' "$tmp/own"
      sed -nE 's/^[[:space:]]*struct ([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\{.*/\1/p' "$tmp/own"; } | sort -u >"$tmp/names"
    rep=
    for nm in $(cat "$tmp/names"); do
        a=$2
        while [ -n "$a" ] && [ -f "$a" ]; do
            ln=$(code "$a" "" kernel | grep -nE "[^A-Za-z0-9_]$nm\(|struct $nm[[:space:]]*\{" | grep -v ';[[:space:]]*$' | head -n 1 | cut -d: -f1)
            if [ -n "$ln" ]; then rep="$rep$nm ($(label "$a"), $(basename "$a"):$ln), "; break; fi
            inc=$(included_rung "$a"); [ -n "$inc" ] && a=$(dirname "$a")/$inc || a=
        done
    done
    echo "($own lines of code of its own$([ -n "$rep" ] && echo "; the hooks it replaces: ${rep%, }"))"
}

idea_of() {
    f=$(file_of "$1")
    [ -n "$f" ] || { echo "make idea K=N: N is a forward or FP8 kernel (2, 15, ...), a backward kernel B2..., or a decode kernel D2... (got '$1')" >&2; exit 2; }
    n=$(number "$f"); pre=$(prefix "$f")
    e=$(field_n extends "$f")
    [ -n "$e" ] || { echo "$(rel "$f"): no '.extends = N' in its registry entry" >&2; exit 2; }
    if [ "$e" = 0 ]; then
        echo "$(label "$f") ($(rel "$f")) is the first rung: it extends no kernel (its header says what it transcribes)"
        return 0
    fi
    p=$(file_of "$pre$e")
    [ -n "$p" ] || { echo "$(rel "$f"): extends $pre$e, which does not exist" >&2; exit 2; }
    echo "$(label "$f") ($(rel "$f")) extends $(label "$p") ($(rel "$p"))"
    echo "the one idea: $(idea_text "$f")"
    inc=$(included_rung "$f")
    if [ -n "$inc" ]; then
        [ "$inc" = "$(basename "$p")" ] || { echo "$(rel "$f"): includes $inc, but its entry says it extends $(basename "$p")" >&2; exit 2; }
        echo "(a rung on a shared body: its file includes $(basename "$p") and holds only its idea, printed whole$([ -z "$all" ] && echo "; its launcher left out, ALL=1 shows it"))"
        echo
        show_rung "$f" "$p"
    else
        echo "(compared without comments, blank lines and whitespace; added lines shown with their comments; the kernel's number in names written N$([ -z "$all" ] && echo "; the kernels, not their launchers"))"
        echo
        show_diff "$p" "$f" "$e" "$n"
    fi
}

# check_tree: one PASS or FAIL line per kernel of every family (its rung), into stdout; exit 1 on a FAIL
check_tree() {
    bad=0
    for f in "$top"/forward/kernel[0-9][0-9]_*.cu "$top"/fp8/kernel[0-9][0-9]_*.cu "$top"/backward/bwd[0-9][0-9]_*.cu \
             "$top"/decode/decode[0-9][0-9]_*.cu; do
        [ -f "$f" ] || continue
        k=$(prefix "$f")$(number "$f")
        id=$(field_n id "$f"); e=$(field_n extends "$f")
        why=
        twin=   # forward and FP8 share one numbering: another file of either with this number
        case $f in */forward/*|*/fp8/*)
            twin=$(for g in "$(dirname "$f")"/../forward/kernel$(printf '%02d' "$(number "$f")")_*.cu \
                            "$(dirname "$f")"/../fp8/kernel$(printf '%02d' "$(number "$f")")_*.cu; do
                       [ -f "$g" ] && [ "$(basename "$g")" != "$(basename "$f")" ] && basename "$g"; done) ;;
        esac
        if [ -n "$twin" ]; then why="its number is also $twin's: the forward and FP8 kernels share one numbering"
        elif [ "$(echo "$e" | grep -c .)" != 1 ]; then why="expected one '.extends = N' in its registry entry, found $(echo "$e" | grep -c .)"
        elif [ "$id" != "$(number "$f")" ]; then why="its entry's .id is '$id', its file's number $(number "$f")"
        elif [ "$e" = 0 ]; then [ "$(number "$f")" = 1 ] || why=".extends = 0 (no predecessor): only a family's first kernel has none"
        else
            p=$(file_of "$(prefix "$f")$e")
            if [ -z "$p" ]; then why=".extends = $e names no kernel of its family"
            elif [ "$e" -ge "$(number "$f")" ]; then why=".extends = $e is not below it"
            else
                inc=$(included_rung "$f")
                if [ -n "$inc" ] && [ "$inc" != "$(basename "$p")" ]; then why="it includes $inc, but .extends = $e is $(basename "$p")"; fi
            fi
        fi
        if [ -z "$why" ] && [ "$e" != 0 ]; then
            out=$(sh "$0" "$k" 2>"$tmp/err"); rc=$?
            if [ "$rc" -ne 0 ]; then why="make idea K=$k failed: $(head -c 200 "$tmp/err")"
            else
                # lines of the kernel's own file in what make idea shows: "+" lines of a diff, or the rung's numbered lines
                own=$(printf '%s\n' "$out" | grep -c "^+[^+]\|^$(basename "$f"):[0-9]*:")
                [ "$own" -gt 0 ] || why="make idea K=$k shows no line of $(basename "$f")"
            fi
        fi
        if [ -z "$why" ]; then
            [ "$e" = 0 ] && echo "PASS idea/$k: $(rel "$f") is its ladder's first rung" \
                || echo "PASS idea/$k: $(rel "$f") extends $(rel "$p"); make idea shows $own lines of its own"
        else
            bad=1; echo "FAIL idea/$k: $(rel "$f"): $why"
        fi
    done
    return $bad
}

all=
[ "$1" = "--all" ] && { all=1; shift; }
case $1 in
--check-tree) check_tree; exit $? ;;
--check)
    check_tree >"$tmp/real" || failed=1
    cat "$tmp/real"
    # the check itself can fail: in a copy of the tree with one wrong predecessor planted (kernel 3 extends 99) it must
    # give one FAIL line more, for kernel 3
    cp -r "$top" "$tmp/tree" && rm -rf "$tmp/tree/host" && mkdir "$tmp/tree/host" && cp "$0" "$tmp/tree/host/idea.sh"
    f=$(ls "$tmp"/tree/forward/kernel03_*.cu | head -n 1)
    sed -i 's/\.extends = 2,/.extends = 99,/' "$f"
    sh "$tmp/tree/host/idea.sh" --check-tree 2>&1 | grep '^FAIL ' | grep -vxF -f "$tmp/real" >"$tmp/planted"
    if [ "$(grep -c '^FAIL idea/3:' "$tmp/planted")" = 1 ] && [ "$(grep -c . "$tmp/planted")" = 1 ]; then
        echo "PASS idea/planted: kernel 3 made to extend 99 is caught: $(sed 's/^FAIL //' "$tmp/planted")"
    else
        failed=1; echo "FAIL idea/planted: kernel 3 made to extend 99, expected one new FAIL line for it, got: $(cat "$tmp/planted")"
    fi
    # and a forward kernel with an FP8 kernel's number (kernel 3 copied as the last FP8 kernel no kernel extends, so
    # that no rung above it fails too): two FAIL lines
    sed -i 's/\.extends = 99,/.extends = 2,/' "$f"
    twin=$(for g in "$top"/fp8/kernel[0-9]*.cu; do sed -n 's/^ *\.id = \([0-9]*\),.*/\1/p' "$g"; done |
           while read -r n; do grep -q "\.extends = $n," "$top"/forward/*.cu "$top"/fp8/*.cu || echo "$n"; done | tail -n 1)
    sed "s/\.id = 3,/.id = $twin,/" "$f" >"$tmp/tree/forward/kernel${twin}_twin.cu"
    sh "$tmp/tree/host/idea.sh" --check-tree 2>&1 | grep '^FAIL ' | grep -vxF -f "$tmp/real" >"$tmp/planted"
    if [ -n "$twin" ] && [ "$(grep -c "^FAIL idea/$twin: .*share one numbering" "$tmp/planted")" = 2 ] &&
       [ "$(grep -c . "$tmp/planted")" = 2 ]; then
        echo "PASS idea/planted-twin: a forward kernel numbered as FP8 kernel $twin is caught, in both files"
    else
        failed=1; echo "FAIL idea/planted-twin: a forward kernel numbered ${twin:-(none found)}, expected two new FAIL lines for it, got: $(cat "$tmp/planted")"
    fi
    for k in 99 B99 D99 x 12x "" 0; do
        sh "$0" "$k" >/dev/null 2>"$tmp/err"; rc=$?
        if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then
            echo "PASS idea/bad-input '$k': exit 2, $(cat "$tmp/err")"
        else
            failed=1; echo "FAIL idea/bad-input '$k': expected exit 2 and one line on stderr, got exit $rc and $(wc -l <"$tmp/err") lines"
        fi
    done
    exit "${failed:-0}" ;;
esac
idea_of "$1"
