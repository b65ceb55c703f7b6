// s2s's byte-pair encoding (include/s2s/bpe.h) in JavaScript, for the reference ONNX decoder:
// raw text → piece ids and back, from the model's bpe.txt, exactly as ./translate does.
//   ids: 0-3 the specials, 4-259 the bytes (<0x41>), then the characters one a line of the
//   file, then one piece per merge (a merge whose text is already a piece reuses its id).
//   encode: each word (split on ASCII whitespace) is "▁" and its characters (a character the
//   file lacks: its UTF-8 bytes); the pair of the lowest merge rank is merged, the leftmost
//   among equals, until no pair has a merge.
//   decode: pieces joined, "▁" a space, the first space dropped; runs of byte pieces read as
//   UTF-8 (U+FFFD for a byte that is not), <unk> as " ⁇ ", the other specials as nothing.
'use strict';

const FIRST_BYTE = 4, FIRST_CHAR = 260, MARK = '\u2581', BYTE_RUN = 64;
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0b, 0x0c, 0x0d]);

// whether bytes is UTF-8 without overlong forms, surrogates or code points past U+10FFFF
function utf8Valid(b) {
  for (let i = 0; i < b.length;) {
    const c = b[i];
    let n, min;
    if (c < 0x80) { i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) n = 1, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) n = 2, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) n = 3, min = 0x10000;
    else return false;
    let cp = c & (0x3f >> n);
    for (let k = 1; k <= n; k++) {
      if (i + k >= b.length || (b[i + k] & 0xc0) !== 0x80) return false;
      cp = (cp << 6) | (b[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

class Bpe {
  // text: the bpe.txt file; vocab: the model's vocabulary (s2s.json), which must be its pieces
  constructor(text, vocab) {
    const lines = text.split('\n');
    const m = /^s2s-bpe 1 chars=(\d+) merges=(\d+)$/.exec(lines[0]);
    if (!m) throw new Error('bpe: expected "s2s-bpe 1 chars=N merges=M" on the first line');
    const chars = Number(m[1]), merges = Number(m[2]);
    this.pieces = vocab;
    this.text = new Map(); // characters' and merges' texts → id
    this.ranks = new Map(); // "left right" ids → the rank of the pair's first merge
    this.mergePiece = [];
    let next = FIRST_CHAR;
    for (let k = 0; k < chars + merges; k++) {
      const line = lines[k + 1];
      if (line === undefined) throw new Error('bpe: the file ends early');
      if (k < chars) { this.text.set(line, next++); continue; }
      const [l, r] = line.split(' ');
      const li = this.text.get(l), ri = this.text.get(r);
      if (li === undefined || ri === undefined) throw new Error(`bpe: line ${k + 2}: unknown piece`);
      let id = this.text.get(l + r);
      if (id === undefined) this.text.set(l + r, id = next++);
      const key = `${li} ${ri}`;
      if (!this.ranks.has(key)) this.ranks.set(key, k - chars);
      this.mergePiece.push(id);
    }
    this.nChars = chars;
    if (vocab.length !== next) throw new Error(`bpe: ${next} pieces, the vocabulary has ${vocab.length}`);
  }

  charId(ch) {
    const id = this.text.get(ch);
    return id !== undefined && id >= FIRST_CHAR && id < FIRST_CHAR + this.nChars ? id : -1;
  }

  encode(line) {
    const out = [], bytes = Buffer.from(line, 'utf8');
    const mark = this.charId(MARK);
    for (let p = 0; p < bytes.length;) {
      while (p < bytes.length && SPACE.has(bytes[p])) p++;
      if (p >= bytes.length) break;
      const sym = mark >= 0 ? [mark] : [...Buffer.from(MARK, 'utf8')].map((b) => FIRST_BYTE + b);
      let q = p;
      while (q < bytes.length && !SPACE.has(bytes[q])) q++;
      for (const ch of bytes.subarray(p, q).toString('utf8')) {
        const id = this.charId(ch);
        if (id >= 0) sym.push(id);
        else for (const b of Buffer.from(ch, 'utf8')) sym.push(FIRST_BYTE + b);
      }
      p = q;
      for (;;) { // the lowest rank, the leftmost among equals
        let best = -1, rank = Infinity;
        for (let i = 0; i + 1 < sym.length; i++) {
          const r = this.ranks.get(`${sym[i]} ${sym[i + 1]}`);
          if (r !== undefined && r < rank) rank = r, best = i;
        }
        if (best < 0) break;
        sym.splice(best, 2, this.mergePiece[rank]);
      }
      out.push(...sym);
    }
    return out;
  }

  decode(ids) {
    const out = [];
    let run = [];
    const flush = () => {
      for (let i = 0; i < run.length;) {
        let take = 0;
        for (let w = 4; w >= 1 && !take; w--) if (i + w <= run.length && utf8Valid(run.slice(i, i + w))) take = w;
        if (take) out.push(...run.slice(i, i + take)), i += take;
        else out.push(0xef, 0xbf, 0xbd), i++;
      }
      run = [];
    };
    for (const id of ids) {
      if (id >= FIRST_BYTE && id < FIRST_CHAR) {
        if (run.length === BYTE_RUN) flush();
        run.push(id - FIRST_BYTE);
        continue;
      }
      flush();
      const t = id < FIRST_BYTE ? (id === 1 ? ' \u2047 ' : '') : this.pieces[id];
      if (t) out.push(...Buffer.from(t.split(MARK).join(' '), 'utf8'));
    }
    flush();
    let s = Buffer.from(out).toString('utf8');
    if (s.startsWith(' ')) s = s.slice(1);
    return s;
  }
}

module.exports = { Bpe, utf8Valid };
