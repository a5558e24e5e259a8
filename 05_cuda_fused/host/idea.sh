#!/bin/sh
# idea.sh K: the one idea of kernel K in plain sight (make idea K=12, make idea K=B5, make idea K=D3).
#
# Every kernel file from kernel 2, backward kernel 2 and decode kernel 2 on names, in one line of its header,
# the kernel it extends and its one idea:
#     * Extends: kernel11_tma.cu; idea: a producer warpgroup copies K and V, ...
# and, where its code lives in a template shared with its neighbours, which one and with what:
#     * Code: overlap.cuh with PINGPONG = true
# This prints kernel K's code against the code of the kernel it extends as a unified diff,
# filtered to the lines that carry the idea: comments, blank lines and changes of whitespace
# are left out of the comparison, and names that only carry the kernel's number (K11_BR and K12_BR,
# k11_launch, kernel11_tma) are written with N, so that a rename is not shown as a change. An added
# line is printed as it stands in kernel K's file, with its comment and the comment lines right
# above it (the code's own explanation). A line that ends with "// aside" carries what a later step
# needs, not this kernel's idea (the backward's L, step 06's ALiBi): hidden and counted (ALL=1 shows
# it). Each @@ line names the line in each file where its hunk starts.
# Two kernels that share a template and differ in its flags (13/14, B3/B4, B5/B6) show the
# two instantiations against each other, then the template's lines that read the flags that
# differ (with the blocks they open), the kernel's first, then the launcher's.
#
#     sh 05_cuda_fused/idea.sh 12        sh 05_cuda_fused/idea.sh B5
#     sh 05_cuda_fused/idea.sh --check   every kernel's header line, for make check
# Bad input: one line on stderr, exit 2.
dir=$(dirname "$0")/..
# where a file of 05_cuda_fused lives: its family folder (forward/, fp8/, backward/, decode/)
at() { for x in "$dir"/*/"$1"; do [ -f "$x" ] && { echo "$x"; return; }; done; echo "$dir/$1"; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

usage() { echo "make idea K=N: N is a forward kernel 2..$1, a backward kernel B2..B$2 or a decode kernel D2..D$3 (got '$4')" >&2; exit 2; }

# file_of K: the source file of kernel K (12 or B5), empty if there is none
file_of() {
    case $1 in
        [Bb][0-9]*) n=${1#?}; fam=bwd ;;
        [Dd][0-9]*) n=${1#?}; fam=decode ;;
        *) n=$1; fam=kernel ;;
    esac
    case $n in ''|*[!0-9]*|0*) return 0 ;; esac
    # the forward and backward files carry two digits (kernel02_..., bwd10_...) so that a listing reads in ladder order
    n=$(printf '%02d' "$n")
    set -- "$dir"/*/"$fam${n}"_*.cu
    [ -f "$1" ] && echo "$1"
}
# label FILE: "kernel 12" or "backward kernel 5"
label() {
    b=$(basename "$1")
    case $b in
        kernel[0-9]*) echo "kernel $(number "$1")" ;;
        bwd[0-9]*) echo "backward kernel $(number "$1")" ;;
        decode[0-9]*) echo "decode kernel $(number "$1")" ;;
        *) echo "$b" ;;
    esac
}
number() { b=$(basename "$1"); b=${b#kernel}; b=${b#bwd}; b=${b#decode}; b=${b%%_*}; echo "${b#0}"; }
# header FIELD FILE: the text after " * FIELD: " in the file's header, empty if absent
header() { sed -n "s/^ \* $1: //p" "$2" | head -n 1; }
extends() { header Extends "$1" | sed -n 's/^\([A-Za-z0-9_]*\.cu\); idea: ..*$/\1/p'; }
idea() { header Extends "$1" | sed -n 's/^[A-Za-z0-9_]*\.cu; idea: \(..*\)$/\1/p'; }
code_file() { header Code "$1" | sed -n 's/^\([A-Za-z0-9_]*\.cuh\) with .*/\1/p'; }
# flags FILE: the template's flags as NAME=VALUE lines
flags() { header Code "$1" | sed -n 's/^[A-Za-z0-9_]*\.cuh with //p' | tr ',' '\n' | sed 's/ //g'; }

# code FILE NUMBER [PART]: the file with comments (and "(void)x;" lines) removed, one output line per input line (so that
# line numbers stay the file's), names carrying NUMBER written with N. PART: "kernel" (the default)
# blanks the lines from the "// --- the launcher" banner on, "launcher" the lines before it, "all" none.
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
        if (out ~ /^[ \t]*\(void\)/) out = ""     # (void)x, ...: unused-argument silencers, not code that runs
        # "// aside" (or "// aside: why") ends a line that a later step needs but that is not the idea here (the L store for
        # the backward, the ALiBi modifier): hidden, and counted, unless ALL=1 (a line, not the idea of this kernel)
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

# show_diff A B NA NB: the unified diff of the code of files A and B (from code(), blank lines
# dropped; each @@ line names where its hunk starts in each file), the kernels only unless $all;
# then how many lines it adds and removes (and the launchers')
show_diff() {
    part=kernel; [ -n "$all" ] && part=all
    code "$1" "$3" "$part" | compact "$tmp/a"; code "$2" "$4" "$part" | compact "$tmp/b"
    hidden=$(cat "$tmp/code.asides")
    diff -b -U 1 "$tmp/a" "$tmp/b" >"$tmp/d"
    # An added line is printed as it stands in B, with its comment, and under it the comment lines that stand
    # right above it in B: the code's own explanation of the idea (the comparison itself ignores comments).
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
# inst_counts A B NA NB: "X lines added, Y removed", what the two instantiating files' code adds and removes
inst_counts() {
    code "$1" "$3" all | compact "$tmp/a"; code "$2" "$4" all | compact "$tmp/b"
    diff -b "$tmp/a" "$tmp/b" >"$tmp/d"
    l=$(changed "$tmp/d"); echo "${l% *} lines added, ${l#* } removed"
}
# compact OUT: the non-blank lines of stdin to OUT, and to OUT.map the line number each came from
compact() { awk -v out="$1" -v map="$1.map" 'NF { print > out; print NR > map }'; : >>"$1"; : >>"$1.map"; }
# changed DIFF: "ADDED REMOVED", the non-blank lines a diff adds and removes
changed() { awk '/^(\+\+\+|---) / { next } /^[+>][ \t]*[^ \t]/ { a++ } /^[-<][ \t]*[^ \t]/ { d++ } END { print a + 0, d + 0 }' "$1"; }

# flag_lines TEMPLATE FLAG...: the template lines that read one of the flags (outside a template
# argument list), each with the block it opens, numbered as in the file
flag_lines() {
    t=$1; shift
    part=${FLAG_PART:-kernel}; [ -n "$all" ] && part=all
    code "$t" "" "$part" | awk -v flags="$*" -v T="$(basename "$t")" '
        BEGIN { nf = split(flags, f, " ") }
        function opens(s,   o, c) { o = gsub(/\{/, "{", s); c = gsub(/\}/, "}", s); return o - c }
        depth == 1 && /^[ \t]*\}[ \t]*else[ \t]+if/ { printf "%s:%d: %s\n", T, NR, $0; depth = 0; shown = NR }   # "} else if (X) {" opens the block of X, not of the flag
        depth > 0 { if ($0 ~ /[^ \t]/) printf "%s:%d: %s\n", T, NR, $0; depth += opens($0); next }
        # "if (FLAG) a; else ..." on lines of their own: the else and what it runs (a block, or one statement)
        pend_else && /^[ \t]*else([^A-Za-z0-9_]|$)/ {
            printf "%s:%d: %s\n", T, NR, $0; pend_else = 0
            depth = opens($0); if (depth == 0 && $0 !~ /;[ \t]*$/) pend_stmt = 1
            next
        }
        pend_stmt && /[^ \t]/ { printf "%s:%d: %s\n", T, NR, $0; pend_stmt = 0; depth = opens($0); next }
        /[^ \t]/ { pend_else = 0 }
        {
            s = $0
            while (s ~ /<[^<>]*>/) gsub(/<[^<>]*>/, "", s)       # template argument lists pass a flag on, they do not read it
            hit = 0
            for (k = 1; k <= nf; k++) if (s ~ ("(^|[^A-Za-z0-9_])" f[k] "([^A-Za-z0-9_]|$)")) hit = 1
            if (!hit) next
            if (shown != NR) printf "%s:%d: %s\n", T, NR, $0
            s = $0; sub(/^[ \t]*\}/, "", s)                # "} else if (FLAG) {" opens the block after it
            depth = opens(s)
            if (depth == 0 && s ~ /(^|[^A-Za-z0-9_])if[ \t]*(constexpr[ \t]*)?\(/ && s ~ /;[ \t]*$/) pend_else = 1
        }'
}

idea_of() {
    f=$(file_of "$1")
    maxk=$(ls "$dir"/*/kernel[0-9]*_*.cu | sed 's/.*kernel\([0-9]*\)_.*/\1/' | sort -n | tail -n 1)
    maxb=$(ls "$dir"/*/bwd[0-9]*_*.cu | sed 's/.*bwd\([0-9]*\)_.*/\1/' | sort -n | tail -n 1)
    maxd=$(ls "$dir"/*/decode[0-9]*_*.cu | sed 's/.*decode\([0-9]*\)_.*/\1/' | sort -n | tail -n 1)
    [ -n "$f" ] || usage "$maxk" "$maxb" "$maxd" "$1"
    p=$(extends "$f")
    if [ -z "$p" ]; then
        case $(number "$f") in
            1) echo "$(label "$f") ($(basename "$f")) is the first rung: it extends no kernel (its header says what it transcribes)"; return 0 ;;
        esac
        echo "$(basename "$f"): no ' * Extends: FILE.cu; idea: ...' line in its header" >&2; exit 2
    fi
    pf=$(at "$p")
    [ -f "$pf" ] || { echo "$(basename "$f"): extends $p, which does not exist" >&2; exit 2; }
    n=$(number "$f"); pn=$(number "$pf")
    echo "$(label "$f") ($(basename "$f")) extends $(label "$pf") ($p)"
    echo "the one idea: $(idea "$f")"
    c=$(code_file "$f"); pc=$(code_file "$pf")
    if [ -n "$c" ] && [ "$c" = "$pc" ]; then
        flags "$f" >"$tmp/fk"; flags "$pf" >"$tmp/fp"
        changed=$(sort "$tmp/fk" "$tmp/fp" | uniq -u | sed 's/=.*//' | sort -u | tr '\n' ' ')
        [ -n "$changed" ] || { echo "$(basename "$f"): same template $c as $p with the same flags" >&2; exit 2; }
        list() { tr '\n' ' ' <"$1" | sed 's/ $//;s/ /, /g'; }
        echo "both run the template $c: $(label "$pf") with $(list "$tmp/fp"), $(label "$f") with $(list "$tmp/fk")."
        if [ -n "$all" ]; then
            echo "Below, (1) the two files that instantiate it, then (2) the lines of $c that read ${changed% }, with the"
            echo "blocks they open (comments, blank lines and whitespace changes dropped; the kernel's number in names written N)."
            echo
            echo "(1) $p -> $(basename "$f")"
            show_diff "$pf" "$f" "$pn" "$n"
            echo
            echo "(2) $c"
        fi
        # shellcheck disable=SC2086
        flag_lines "$(at "$c")" $changed >"$tmp/flags"
        # the kernel reads the flag nowhere but in its declaration: the idea is in how the kernel is launched
        if ! grep -qv 'static constexpr [^=]* = [A-Z_]*_;' "$tmp/flags" && [ -z "$all" ]; then
            # shellcheck disable=SC2086
            FLAG_PART=launcher flag_lines "$(at "$c")" $changed >"$tmp/flags"
            echo "Its kernel is the same code; the idea is in the launcher. Below, the launcher's lines that read ${changed% },"
            echo "with the blocks they open (comments dropped; the two .cu files that instantiate it: $(inst_counts "$pf" "$f" "$pn" "$n"))."
            echo
            cat "$tmp/flags"
            nl=$(grep -c . "$tmp/flags")
            echo "($nl line$([ "$nl" = 1 ] || echo s) of $c's launcher $([ "$nl" = 1 ] && echo depends || echo depend) on ${changed% })"
            # a kernel those lines launch that the template defines (decode kernel 11's merge): its code, from its
            # template line to its closing brace, comments dropped
            for fn in $(grep -o '[a-z_0-9]*<' "$tmp/flags" | tr -d '<' | sort -u); do
                grep -q "^$fn(" "$(at "$c")" || continue
                echo
                echo "The kernel they launch, $fn ($c):"
                echo
                awk -v fn="$fn" '$0 ~ "^template" { t = NR; buf = "" }
                    t && !on { buf = buf $0 "\n" }
                    index($0, fn "(") == 1 { on = 1; printf "%s", buf; next }
                    on { print; if ($0 ~ /^}/) exit }' "$(at "$c")" | sed 's|[[:space:]]*//.*$||' | grep -v '^[[:space:]]*$'
            done
        else
            if [ -z "$all" ]; then
                echo "Below, the lines of its kernel that read ${changed% }, with the blocks they open (comments dropped;"
                echo "the two .cu files that instantiate it: $(inst_counts "$pf" "$f" "$pn" "$n"); ALL=1 shows them and the whole launcher)."
                echo
            fi
            cat "$tmp/flags"
            echo "($(grep -c . "$tmp/flags") lines of $c depend on ${changed% })"
            if [ -z "$all" ]; then
                # and where the launcher reads the flag too (how the kernel is launched is part of the idea), its lines
                # shellcheck disable=SC2086
                FLAG_PART=launcher flag_lines "$(at "$c")" $changed >"$tmp/launch"
                if grep -q . "$tmp/launch"; then
                    echo
                    echo "The launcher's lines that read ${changed% }, with the blocks they open:"
                    echo
                    cat "$tmp/launch"
                fi
            fi
        fi
    else
        a=$pf; b=$f
        [ -n "$pc" ] && a=$(at "$pc")
        [ -n "$c" ] && b=$(at "$c")
        [ -n "$c$pc" ] && echo "the code: $(basename "$a")${pc:+ (what $p runs: ${pc} with $(flags "$pf" | tr '\n' ' ' | sed 's/ $//;s/ /, /g'))} against $(basename "$b")${c:+ (what $(basename "$f") runs: $c with $(flags "$f" | tr '\n' ' ' | sed 's/ $//;s/ /, /g'))}"
        echo "(compared without comments, blank lines and whitespace; added lines shown with their comments; the kernel's number in names written N$scope)"
        echo
        show_diff "$a" "$b" "$pn" "$n"
    fi
}

all= scope="; the kernels, not their launchers"
[ "$1" = "--all" ] && { all=1 scope=; shift; }
if [ "$1" = "--check" ]; then
    # Every kernel from 2 on names an existing kernel it extends and its idea, and shows a
    # non-empty difference; a kernel that does not exist is a usage error.
    for k in $(for f in "$dir"/*/kernel[0-9]*_*.cu; do number "$f"; done | sort -n) \
             $(for f in "$dir"/*/bwd[0-9]*_*.cu; do echo "B$(number "$f")"; done | sort -k 1.2 -n) \
             $(for f in "$dir"/*/decode[0-9]*_*.cu; do echo "D$(number "$f")"; done | sort -k 1.2 -n); do
        case $k in 1|B1|D1) continue ;; esac
        f=$(file_of "$k")
        out=$(sh "$0" "$k" 2>"$tmp/err"); rc=$?
        # a diff with changed lines, or a template flag that some line of the template reads
        lines=$(printf '%s\n' "$out" | grep -c '^[+-]')
        dep=$(printf '%s\n' "$out" | sed -n 's/^(\([0-9]*\) lines\{0,1\} of .* depends\{0,1\} on .*)$/\1/p')
        [ -n "$dep" ] && lines=$dep
        if [ "$rc" -eq 0 ] && [ "$lines" -gt 0 ] && [ -n "$(idea "$f")" ]; then
            echo "PASS idea/$k: $(printf '%s\n' "$out" | head -n 1), $(printf '%s\n' "$out" | grep -E '^\([0-9]+ lines? of (code added, .*|.* depends? on .*)\)$' | tr '\n' ' ' | sed 's/ $//')"
        else
            failed=1
            echo "FAIL idea/$k: expected a header line ' * Extends: FILE.cu; idea: ...' naming an existing kernel and a non-empty diff, got exit $rc, $lines changed lines: $(head -c 200 "$tmp/err")"
        fi
    done
    # a flag read as "if (FLAG) a;" with an "else" on the next line: the else's statement is the flag's too
    # (B11's loops over the items are what PERSIST's "if constexpr (!PERSIST) vecs(...); else" runs)
    if [ -n "$(file_of B11)" ]; then
        n=$(sh "$0" B11 2>/dev/null | grep -c 'take_item(item, tbh, tjt)')
        if [ "$n" -eq 2 ]; then echo "PASS idea/else: make idea K=B11 shows the item loops of the 2 else branches (take_item)"
        else failed=1; echo "FAIL idea/else: make idea K=B11 shows $n of the 2 else branches' item loops (take_item)"; fi
    fi
    for k in 99 B99 D99 x 12x ""; do
        sh "$0" "$k" >/dev/null 2>"$tmp/err"; rc=$?
        if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ]; then
            echo "PASS idea/bad-input '$k': exit 2, $(cat "$tmp/err")"
        else
            failed=1
            echo "FAIL idea/bad-input '$k': expected exit 2 and one line on stderr, got exit $rc and $(wc -l <"$tmp/err") lines"
        fi
    done
    exit "${failed:-0}"
fi
idea_of "$1"
