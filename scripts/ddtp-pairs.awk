# Pairs the German and English package descriptions of a Debian release (its
# main/i18n/Translation-en and Translation-de files, decompressed) into segments, one
# "german<TAB>english" line each. Run with LC_ALL=C (bytes, not characters):
#   awk -f ddtp-pairs.awk Translation-en Translation-de
# A German description names the English one it translates by the MD5 of its text
# (Description-md5), so the two are matched by that, never by package name. Each pair gives
# its one-line summaries, then, where both sides have the same number of paragraphs and list
# items, each paragraph or item; a segment whose sides split into the same number of
# sentences gives its sentences instead. Sides identical or longer than MAXW words are left out.

BEGIN { MAXW = 80; FS = "\n" }

FNR == 1 { file++ }

# one record: Package, Description-md5, Description-xx (summary) and its indented lines
/^Description-md5: / { md5 = substr($0, 18); next }
/^Description-[a-z_A-Z]+: / { sub(/^Description-[a-z_A-Z]+: /, ""); text = $0; n = 1; next }
/^ / { if (n) { text = text "\n" substr($0, 2); n++ }; next }
/^$/ { flush(); next }
END { flush() }

function flush() {
    if (md5 != "" && n) {
        if (file == 1) en[md5] = text
        else if (md5 in en) pair_descriptions(text, en[md5])
    }
    md5 = ""; text = ""; n = 0
}

# the segments of a description's long part: paragraphs (split at "." lines) and list items
function segments(desc, seg,    lines, k, i, line, m) {
    k = split(desc, lines, "\n")
    m = 0
    for (i = 2; i <= k; i++) {
        line = lines[i]
        if (line == ".") { open_seg = 0; continue }
        if (line ~ /^ *[-*o+] /) { sub(/^ *[-*o+] +/, "", line); seg[++m] = line; open_seg = 1; continue }
        if (!open_seg || m == 0) { seg[++m] = line; open_seg = 1; continue }
        seg[m] = seg[m] " " line
    }
    open_seg = 0
    return m
}

function pair_descriptions(de, en_text,    sd, se, nd, ne, i, d1, e1) {
    d1 = de; sub(/\n.*/, "", d1)
    e1 = en_text; sub(/\n.*/, "", e1)
    emit(d1, e1)
    nd = segments(de, sd)
    ne = segments(en_text, se)
    if (nd != ne) return
    for (i = 1; i <= nd; i++) pair_sentences(sd[i], se[i])
}

# the sentences of a segment: cut after . ! or ? that a space and a capital or digit follow
function sentences(s, out,    m, rest) {
    m = 0
    rest = s
    while (match(rest, /[.!?] +[A-Z0-9]/)) {
        out[++m] = substr(rest, 1, RSTART)
        rest = substr(rest, RSTART + 1)
        sub(/^ +/, "", rest)
    }
    out[++m] = rest
    return m
}

function pair_sentences(d, e,    a, b, na, nb, i) {
    na = sentences(d, a)
    nb = sentences(e, b)
    if (na == nb && na > 1) {
        for (i = 1; i <= na; i++) emit(a[i], b[i])
    } else emit(d, e)
}

function clean(s) {
    gsub(/[ \t\r]+/, " ", s)
    sub(/^ /, "", s)
    sub(/ $/, "", s)
    return s
}

function emit(d, e,    wd, we, x) {
    d = clean(d); e = clean(e)
    if (d == "" || e == "" || d == e) return
    wd = split(d, x, " "); we = split(e, x, " ")
    if (wd > MAXW || we > MAXW) return
    print d "\t" e
}
