#!/usr/bin/env bash
# make test-install: install into a temporary prefix; build tests/install/translate_line.c
# against it with pkg-config, linked to the shared library and to the static one; both must
# translate as ./translate does; the programs and man pages are there; uninstall removes all.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P="$T/prefix"
fail() { echo "test-install: $*" >&2; exit 1; }
make -s install PREFIX="$P" > "$T/install.log" 2>&1 || { cat "$T/install.log"; fail "make install failed"; }
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
pkg-config --exists s2s || fail "pkg-config does not find s2s"
[ "$(pkg-config --modversion s2s)" = "$(sed -n 's/^#define S2S_VERSION "\(.*\)"/\1/p' include/s2s/common.h)" ] || fail "s2s.pc's version"
CC=${CC:-cc}
# shared: only libs2s.so.0 is needed at run time (its own libraries come with it)
$CC -std=c11 -Wall -Wextra -Werror tests/install/translate_line.c $(pkg-config --cflags --libs s2s) -o "$T/shared"
readelf -d "$T/shared" | grep -q 'NEEDED.*libs2s\.so\.0' || fail "the program does not link libs2s.so.0"
readelf -d "$P/lib/libs2s.so.0" | grep -q 'SONAME.*libs2s\.so\.0' || fail "libs2s.so has no soname libs2s.so.0"
# static: libs2s.a and the private libraries pkg-config lists
$CC -std=c11 -Wall -Wextra -Werror tests/install/translate_line.c $(pkg-config --cflags s2s) \
    "$P/lib/libs2s.a" $(pkg-config --static --libs s2s | sed 's/-ls2s//') -o "$T/static"
M=tests/fuzz/corpus/model/tiny-reverse.bin
for line in abcd dcbaabcd bbba; do
    want=$(printf '%s\n' "$line" | ./translate "$M")
    got_shared=$(LD_LIBRARY_PATH="$P/lib" "$T/shared" "$M" "$line")
    got_static=$("$T/static" "$M" "$line")
    [ "$got_shared" = "$want" ] || fail "shared: '$line' gave '$got_shared', ./translate '$want'"
    [ "$got_static" = "$want" ] || fail "static: '$line' gave '$got_static', ./translate '$want'"
done
want=$(printf 'abcd\n' | ./translate "$M" --beam 3)
[ "$(LD_LIBRARY_PATH="$P/lib" "$T/shared" "$M" abcd 3)" = "$want" ] || fail "beam 3 differs from ./translate --beam 3"
LD_LIBRARY_PATH="$P/lib" "$T/shared" /nonexistent abcd 2> "$T/err" && fail "a missing model file was accepted"
grep -q "/nonexistent" "$T/err" || fail "the error does not name the file: $(cat "$T/err")"
for p in train translate compare import export; do
    "$P/bin/s2s-$p" --help > /dev/null || fail "s2s-$p --help"
done
# the installed programs find the installed configs from any folder (not this tree's configs/)
(cd "$T" && "$P/bin/s2s-train" --config reverse --out "$T/run" --set task.train_size=300 --set task.valid_size=20 \
    --set task.test_size=20 --set train.epochs=1 > "$T/train.log" 2>&1) || { cat "$T/train.log"; fail "s2s-train --config reverse outside the tree"; }
grep -q "share/s2s/configs/reverse.json" "$T/train.log" || fail "s2s-train did not take the installed config: $(head -2 "$T/train.log")"
[ "$(cd "$T" && printf 'abcd\n' | "$P/bin/s2s-translate" "$T/run/model.bin" | wc -l)" = 1 ] || fail "s2s-translate on that model"
# man pages with a real NAME line, a description and examples, found through the prefix's MANPATH
for p in $(make -s --no-print-directory print-clis); do
    page="$P/share/man/man1/s2s-$p.1"
    [ -s "$page" ] || fail "no man page for s2s-$p"
    text=$(MANPATH="$P/share/man" MANWIDTH=100 man "s2s-$p" 2> /dev/null) || fail "man s2s-$p"
    for want in "s2s-$p - " DESCRIPTION OPTIONS EXAMPLES "s2s-$p "; do
        grep -qF -- "$want" <<< "$text" || fail "man s2s-$p has no '$want'"
    done
    [ "$(grep -A1 '^NAME' <<< "$text" | tail -1 | sed 's/.* - //')" != "s2s $p" ] || fail "man s2s-$p: a NAME line of no meaning"
done
# the Python package, where Debian's python3 looks under the prefix, over the installed library
site=$(ls -d "$P"/lib/python3*/dist-packages)
py=$(cd "$T" && PYTHONPATH="$site" /usr/bin/python3 -c 'import sys, s2s
m = s2s.Model(sys.argv[1])
print(s2s.library); print(m.translate("abcd"))' "$OLDPWD/$M") || fail "the installed Python package"
[ "$(sed -n 1p <<< "$py")" = "$site/s2s/../../../libs2s.so.0" ] || fail "the package took $(sed -n 1p <<< "$py"), not the prefix's libs2s.so.0"
[ "$(sed -n 2p <<< "$py")" = "$(printf 'abcd\n' | ./translate "$M")" ] || fail "the installed package translated 'abcd' as '$(sed -n 2p <<< "$py")'"
# s2s.train("reverse") outside the tree: the library finds the installed configs from its own
# file (the interpreter is /proc/self/exe there)
(cd "$T" && PYTHONPATH="$site" /usr/bin/python3 -c 'import sys, s2s
s2s.train("reverse", out=sys.argv[1], set={"task.train_size": 300, "task.valid_size": 20, "task.test_size": 20,
                                            "train.epochs": 1}).run()' "$T/pyrun" > "$T/py.log" 2>&1) \
    || { cat "$T/py.log"; fail "s2s.train(\"reverse\") outside the tree, from the installed package"; }
[ -s "$T/pyrun/model.bin" ] || fail "s2s.train(\"reverse\") wrote no model"
# pip install . into a fresh virtual environment (Debian's pip, no index): the package over the
# prefix's library through the loader's path; the venv has no numpy, and the message says how
# this interpreter gets it
/usr/bin/python3 -m venv "$T/venv" || fail "python3 -m venv (Debian: apt install python3-venv)"
"$T/venv/bin/pip" install -q --no-index . > "$T/pip.log" 2>&1 || { cat "$T/pip.log"; fail "pip install . into a venv"; }
py=$(cd "$T" && LD_LIBRARY_PATH="$P/lib" "$T/venv/bin/python" -c 'import sys, s2s
m = s2s.Model(sys.argv[1])
print(s2s.library); print(m.translate("abcd"))
s2s.train("reverse", out="vrun", set={"task.train_size": 300, "task.valid_size": 20, "task.test_size": 20,
                                      "train.epochs": 1}).run()
try:
    m.attention("abcd")
except ImportError as e:
    print(e)' "$OLDPWD/$M" 2> "$T/venv.err") || { cat "$T/venv.err"; fail "the package pip installed in a venv"; }
[ "$(sed -n 1p <<< "$py")" = "libs2s.so.0" ] || fail "the venv's package took $(sed -n 1p <<< "$py"), not the loader's libs2s.so.0"
[ "$(sed -n 2p <<< "$py")" = "$(printf 'abcd\n' | ./translate "$M")" ] || fail "the venv's package translated 'abcd' as '$(sed -n 2p <<< "$py")'"
[ -s "$T/vrun/model.bin" ] || fail "s2s.train(\"reverse\") from the venv wrote no model"
[ "$(sed -n 3p <<< "$py")" = "arrays need numpy: $T/venv/bin/python -m pip install numpy" ] \
    || fail "the venv without numpy was told: $(sed -n 3p <<< "$py")"
# an install whose configs folder is gone: a bare name says where it looked, not only "cannot open"
rm -rf "$P/share/s2s/configs"
msg=$(cd "$T" && "$P/bin/s2s-train" --config reverse 2>&1) && fail "s2s-train --config reverse without the installed configs: exit 0"
grep -qF "the installed ones ($(realpath "$P")/share/s2s/configs) are missing" <<< "$msg" || fail "s2s-train without its configs said: $msg"
msg=$(cd "$T" && PYTHONPATH="$site" /usr/bin/python3 -c 'import s2s
try:
    s2s.train("reverse", out="norun")
except s2s.FileError as e:
    print(e)' 2>&1)
grep -qF "the installed ones ($(realpath "$P")/share/s2s/configs) are missing" <<< "$msg" || fail "s2s.train without the configs said: $msg"
make -s uninstall PREFIX="$P" > /dev/null
left=$(find "$P" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
echo "test-install: installed to a temporary prefix, built and ran against libs2s.so.0 and libs2s.a, the Python package over it (and pip install . into a venv), uninstalled: OK"
