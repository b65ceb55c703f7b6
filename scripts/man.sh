#!/usr/bin/env bash
# man.sh — a program's man page (roff) on stdout: NAME, DESCRIPTION and EXAMPLES from
# docs/man/PROGRAM.txt (its first line, the paragraphs up to "EXAMPLES", the commands after), and
# SYNOPSIS and OPTIONS from the program's own --help, so the options cannot drift from the code.
#   scripts/man.sh PROGRAM BINARY VERSION
set -euo pipefail
prog=$1 bin=$2 version=$3
src=docs/man/$prog.txt
[ -f "$src" ] || { echo "man.sh: no $src" >&2; exit 1; }
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" -e 's/-/\\-/g'; }
up=$(printf '%s' "s2s-$prog" | tr '[:lower:]' '[:upper:]')
help=$("$bin" --help 2>&1 || true)
echo ".TH $up 1 \"\" \"s2s $version\" \"s2s manual\""
echo ".SH NAME"
echo "s2s-$prog \\- $(head -1 "$src" | esc)"
echo ".SH SYNOPSIS"
echo ".nf"
# the usage block: "usage:" and the indented lines after it
printf '%s\n' "$help" | awk '/^usage:/ { u = 1; print; next } u && /^ / { print; next } u { exit }' | sed -e "s/^usage: $prog/s2s-$prog/" \
    -e "s/^  *$prog /s2s-$prog /" | esc
echo ".fi"
echo ".SH DESCRIPTION"
awk 'NR > 2 && /^EXAMPLES$/ { exit } NR > 2' "$src" | esc
echo ".SH OPTIONS"
echo ".nf"
printf '%s\n' "$help" | awk '/^usage:/ { u = 1; next } u && /^ / && !o { next } u { o = 1 } o' | sed '1{/^$/d}' | esc
echo ".fi"
echo ".SH EXAMPLES"
echo ".nf"
awk 'e; /^EXAMPLES$/ { e = 1 }' "$src" | esc
echo ".fi"
echo ".SH SEE ALSO"
echo "s2s-train(1), s2s-translate(1), s2s-compare(1), s2s-serve(1); the documentation in the source tree's docs/ folder."
