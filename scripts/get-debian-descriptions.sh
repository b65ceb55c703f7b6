#!/usr/bin/env bash
# Makes a German–English parallel corpus from Debian's translated package descriptions (the
# Debian Description Translation Project, DDTP): the English descriptions of a release's main
# archive and their German translations, paired by the MD5 that names each English text, cut
# into summaries, paragraphs, list items and sentences (scripts/ddtp-pairs.awk).
#
#   scripts/get-debian-descriptions.sh [RELEASE] [OUT_DIR]     (bookworm, data/debian-descriptions)
#
# Writes OUT_DIR/{train,val,test}.{de,en} (raw text, one segment a line) and OUT_DIR/SOURCE
# (the release, the files' SHA-256, the counts). A German segment is in one split only (each
# distinct one once, with its first translation): test and val take 1/40 of them each, chosen
# by a hash of the German text, so the same release gives the same splits. The downloaded
# files are checked against the release's InRelease (its signature too, with gpgv and
# debian-archive-keyring where installed), which is kept in OUT_DIR/raw with them: offline, a
# second run checks against that one. DEBIAN_MIRROR overrides http://deb.debian.org/debian.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASE=${1:-bookworm}
DEST=${2:-data/debian-descriptions}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
say() { echo "get-debian-descriptions: $*" >&2; }
case $RELEASE in *[!a-z0-9-]* | "") say "RELEASE: a Debian release name such as bookworm (got '$RELEASE')"; exit 2 ;; esac
for tool in awk sha256sum xz bzip2 gzip; do
    command -v $tool >/dev/null 2>&1 || { say "$tool is not installed (Debian: apt install xz-utils bzip2 gzip)"; exit 1; }
done
get() { # url file
    if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o "$2" "$1"
    elif command -v wget >/dev/null 2>&1; then wget -q -O "$2" "$1"
    else say "neither curl nor wget is installed"; return 1; fi
}

mkdir -p "$DEST/raw"
work=$(mktemp -d "$DEST/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
saved="$DEST/raw/$RELEASE-InRelease"
if ! get "$MIRROR/dists/$RELEASE/InRelease" "$work/InRelease"; then
    [ -f "$saved" ] || { say "cannot get $MIRROR/dists/$RELEASE/InRelease"; exit 1; }
    say "cannot get $MIRROR/dists/$RELEASE/InRelease: using the one saved in $saved"
    cp "$saved" "$work/InRelease"
fi
if command -v gpgv >/dev/null 2>&1 && [ -f $KEYRING ]; then
    gpgv --keyring $KEYRING "$work/InRelease" 2>/dev/null || { say "$RELEASE's InRelease: bad signature"; exit 1; }
    signed="signature checked with $KEYRING"
else
    say "gpgv or debian-archive-keyring missing: the InRelease signature is not checked"
    signed="signature not checked"
fi
cp "$work/InRelease" "$saved.tmp" && mv -f "$saved.tmp" "$saved"

# the SHA-256 section of InRelease lists every file; take each language's compressed file
sums=$(awk '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 } s { print $1, $2, $3 }' "$work/InRelease")
declare -A text
for lang in en de; do
    found=
    for ext in xz bz2 gz; do
        rel=main/i18n/Translation-$lang.$ext
        line=$(awk -v f="$rel" '$3 == f && !n++ { print }' <<< "$sums") # no pipe: an early exit would SIGPIPE echo
        [ -n "$line" ] || continue
        read -r sum _ _ <<< "$line"
        file="$DEST/raw/$RELEASE-Translation-$lang.$ext"
        if ! { [ -f "$file" ] && echo "$sum  $file" | sha256sum -c --quiet - >/dev/null 2>&1; }; then
            get "$MIRROR/dists/$RELEASE/$rel" "$work/t" || { say "cannot get $rel"; exit 1; }
            echo "$sum  $work/t" | sha256sum -c --quiet - >/dev/null 2>&1 || { say "$rel: checksum mismatch"; exit 1; }
            mv -f "$work/t" "$file"
        fi
        case $ext in xz) xz -dc "$file" ;; bz2) bzip2 -dc "$file" ;; gz) gzip -dc "$file" ;; esac > "$work/$lang"
        text[$lang]="$sum  $rel"
        found=1
        break
    done
    [ -n "$found" ] || { say "$RELEASE has no main/i18n/Translation-$lang"; exit 1; }
done

# pair, keep each German segment once, split by a hash of it (LC_ALL=C: bytes)
LC_ALL=C awk -f scripts/ddtp-pairs.awk "$work/en" "$work/de" > "$work/pairs"
LC_ALL=C awk -F'\t' -v w="$work" '
    BEGIN { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i }
    seen[$1]++ { next }
    {
        h = 0
        for (i = 1; i <= length($1); i++) h = (h * 31 + ord[substr($1, i, 1)]) % 2147483647
        split_ = h % 40 == 0 ? "test" : h % 40 == 1 ? "val" : "train"
        print $1 > (w "/" split_ ".de")
        print $2 > (w "/" split_ ".en")
        n[split_]++
    }
    END { printf "train %d\nval %d\ntest %d\n", n["train"], n["val"], n["test"] > (w "/counts") }' "$work/pairs"
{
    echo "Debian $RELEASE main, package descriptions (DDTP), German-English, from $MIRROR"
    echo "InRelease: $signed"
    for lang in en de; do echo "${text[$lang]}"; done
    echo "pairs: $(wc -l < "$work/pairs") segments, $(cut -f1 "$work/pairs" | LC_ALL=C sort -u | wc -l) distinct German"
    cat "$work/counts"
} > "$work/SOURCE"
for split in train val test; do for lang in de en; do mv -f "$work/$split.$lang" "$DEST/$split.$lang"; done; done
mv -f "$work/SOURCE" "$DEST/SOURCE"
cat "$DEST/SOURCE"
