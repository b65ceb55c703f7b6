// SentencePiece .model files in JavaScript, for the reference ONNX decoder: raw text → piece ids
// and back, as ./translate reads and writes a model trained with task.subword "sentencepiece"
// (src/text/spm.c, the unigram and BPE encoders of SentencePiece 0.1.97):
//   normalise: the longest replacement rule of the model's precompiled charsmap (a darts-clone
//     double array), extra whitespace removed, "▁" for spaces and as the dummy prefix;
//   unigram: the best-scoring segmentation (unknown characters at the lowest score less 10);
//   BPE: the highest-scoring adjacent pair merged first, the leftmost among equals;
//   unknown runs one piece, or with byte fallback one <0xHH> piece a byte;
//   decode: byte pieces as UTF-8 (U+FFFD for what is not), "▁" as spaces, the dummy prefix's
//     space dropped, control pieces silent, the unknown piece as the model's surface (" ⁇ ").
// Scores add in float32 as the C code's do, so ties break the same way. Text is handled as
// bytes throughout (a piece's key is its bytes read as Latin-1).
//   node scripts/onnx/spm.js encode|decode MODEL   reads lines, writes pieces or text (a check
//   against ./subword encode|decode; tests/test_onnx.c runs it)
'use strict';
const { utf8Valid } = require('./bpe.js');

const NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER = 4, UNUSED = 5, BYTE = 6;
const MAX_PIECES = 1 << 22, MAX_TRIE_RESULTS = 32, UNK_PENALTY = 10;
const WS = Buffer.from('\u2581', 'utf8'), FFFD = [0xef, 0xbf, 0xbd];
const key = (b) => Buffer.from(b.buffer, b.byteOffset, b.length).toString('latin1');

// ---- protobuf: the fields used, bounded ----
function* fields(b, what) {
  let p = 0;
  const varint = () => {
    let v = 0, mul = 1;
    for (let i = 0; i < 10 && p < b.length; i++, mul *= 128) {
      const c = b[p++];
      v += (c & 0x7f) * mul;
      if (!(c & 0x80)) return v;
    }
    throw new Error(`spm: corrupt ${what}`);
  };
  while (p < b.length) {
    const k = varint(), num = Math.floor(k / 8), wire = k % 8;
    if (wire === 0) yield { num, wire, v: varint() };
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (b.length - p < n) throw new Error(`spm: corrupt ${what}`);
      yield { num, wire, bytes: b.subarray(p, p + n) };
      p += n;
    } else if (wire === 2) {
      const n = varint();
      if (n > b.length - p) throw new Error(`spm: corrupt ${what}`);
      yield { num, wire, bytes: b.subarray(p, p + n) };
      p += n;
    } else throw new Error(`spm: corrupt ${what}`);
  }
}

function binaryHeap(before) { // SentencePiece's agenda, sifted as src/text/spm.c sifts it
  const h = [];
  return {
    get size() { return h.length; },
    push(x) {
      let i = h.length;
      h.push(x);
      while (i && before(x, h[(i - 1) >> 1])) h[i] = h[(i - 1) >> 1], i = (i - 1) >> 1;
      h[i] = x;
    },
    pop() {
      const top = h[0], last = h.pop();
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= h.length) break;
        if (c + 1 < h.length && before(h[c + 1], h[c])) c++;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
      }
      if (h.length) h[i] = last;
      return top;
    },
  };
}

const oneCharLen = (c) => [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4][c >> 4];

class Spm {
  constructor(data) {
    this.piece = []; this.bytes = []; this.score = []; this.type = [];
    this.modelType = 1; this.byteFallback = false; this.unkSurface = null;
    this.addDummyPrefix = this.removeExtraWhitespaces = this.escapeWhitespaces = true; // proto2 defaults
    this.trie = null; this.norm = null;
    for (const f of fields(data, 'model (bad protobuf)')) {
      if (f.num === 1 && f.wire === 2) this.readPiece(f.bytes);
      else if (f.num === 2 && f.wire === 2) {
        for (const g of fields(f.bytes, 'trainer_spec')) {
          if (g.num === 3 && g.wire === 0) this.modelType = g.v;
          else if (g.num === 35 && g.wire === 0) this.byteFallback = g.v !== 0;
          else if (g.num === 44 && g.wire === 2) this.unkSurface = Buffer.from(g.bytes);
        }
      } else if (f.num === 3 && f.wire === 2) this.readNormalizer(f.bytes);
    }
    if (!this.piece.length) throw new Error('spm: not a SentencePiece model (no pieces)');
    if (this.modelType !== 1 && this.modelType !== 2)
      throw new Error(`spm: a SentencePiece model of type ${this.modelType === 3 ? 'word' : 'char'}: ` +
        'only unigram and bpe models are read');
    this.unkId = -1;
    this.minScore = Infinity;
    this.index = new Map(); // normal and unused pieces' bytes → id
    this.others = new Map(); // control, unknown and byte pieces' bytes → the first id
    this.maxPieceBytes = 0;
    this.byteId = new Int32Array(256).fill(-1);
    this.type.forEach((t, i) => {
      if (t === UNKNOWN) {
        if (this.unkId >= 0) throw new Error('spm: two unknown pieces');
        this.unkId = i;
      }
      if (t === USER) throw new Error(`spm: user-defined symbols ("${this.piece[i]}") are not read so far`);
      if (t === NORMAL) this.minScore = Math.min(this.minScore, this.score[i]);
      const k = key(this.bytes[i]);
      if (t === NORMAL || t === UNUSED) {
        if (!this.index.has(k)) this.index.set(k, i);
        this.maxPieceBytes = Math.max(this.maxPieceBytes, this.bytes[i].length);
      } else if (!this.others.has(k)) this.others.set(k, i);
      const m = t === BYTE && /^<0x([0-9A-Fa-f]{2})>$/.exec(this.piece[i]);
      if (m) this.byteId[parseInt(m[1], 16)] = i;
    });
    if (this.unkId < 0) throw new Error('spm: no unknown piece');
    if (!this.unkSurface) this.unkSurface = Buffer.from(' \u2047 ', 'utf8');
  }

  readPiece(b) {
    if (this.piece.length === MAX_PIECES) throw new Error(`spm: more than ${MAX_PIECES} pieces`);
    let text = null, score = 0, type = NORMAL;
    for (const f of fields(b, `piece ${this.piece.length}`)) {
      if (f.num === 1 && f.wire === 2) text = f.bytes;
      else if (f.num === 2 && f.wire === 5) score = Buffer.from(f.bytes).readFloatLE(0);
      else if (f.num === 3 && f.wire === 0) type = f.v;
    }
    if (!text || !text.length || !utf8Valid(text) || type < NORMAL || type > BYTE)
      throw new Error(`spm: piece ${this.piece.length} is empty, not UTF-8 or of an unknown type`);
    this.bytes.push(Uint8Array.from(text));
    this.piece.push(Buffer.from(text).toString('utf8'));
    this.score.push(score);
    this.type.push(type);
  }

  readNormalizer(b) {
    for (const f of fields(b, 'normalizer_spec')) {
      if (f.num === 2 && f.wire === 2 && f.bytes.length) { // u32 trie bytes, the trie, the strings
        const n = f.bytes.length;
        if (n <= 4) throw new Error(`spm: corrupt normalisation rules (${n} bytes)`);
        const tb = Buffer.from(f.bytes).readUInt32LE(0);
        if (tb >= n - 4 || tb % 4 || tb === 0)
          throw new Error(`spm: corrupt normalisation rules (a trie of ${tb} bytes in ${n})`);
        const t = Buffer.from(f.bytes.subarray(4, 4 + tb));
        this.trie = new Uint32Array(tb / 4);
        for (let i = 0; i < this.trie.length; i++) this.trie[i] = t.readUInt32LE(4 * i);
        this.norm = Uint8Array.from(f.bytes.subarray(4 + tb));
      } else if (f.num === 3 && f.wire === 0) this.addDummyPrefix = f.v !== 0;
      else if (f.num === 4 && f.wire === 0) this.removeExtraWhitespaces = f.v !== 0;
      else if (f.num === 5 && f.wire === 0) this.escapeWhitespaces = f.v !== 0;
    }
  }

  // the piece spelled by text[start, end) (text: bytes read as Latin-1, one character a byte)
  find(text, start, end) {
    const id = this.index.get(text.slice(start, end));
    return id === undefined ? -1 : id;
  }

  // ---- normalisation ----
  // the longest rule matching a prefix of b[p..] (among the first 32 matches): [length, replacement]
  longestRule(b, p) {
    const T = this.trie;
    if (!T) return [0, null];
    const offset = (u) => (u >>> 10) << ((u & (1 << 9)) >>> 6);
    const label = (u) => (u & 0x800000ff) >>> 0;
    let pos = offset(T[0]), best = 0, rep = null, found = 0;
    for (let i = p; i < b.length; i++) {
      pos ^= b[i];
      if (pos >= T.length) break;
      const unit = T[pos];
      if (label(unit) !== b[i]) break;
      pos ^= offset(unit);
      if (pos >= T.length) break;
      if ((unit >>> 8) & 1 && found++ < MAX_TRIE_RESULTS) {
        const v = T[pos] & 0x7fffffff;
        if (v < this.norm.length) {
          best = i + 1 - p;
          let e = v;
          while (e < this.norm.length && this.norm[e]) e++;
          rep = this.norm.subarray(v, e);
        }
      }
    }
    return [best, rep];
  }

  // [bytes consumed, replacement]: the longest rule's, or one character as it is (U+FFFD for a
  // byte that starts no valid character, consumed alone)
  normalizePrefix(b, p) {
    const [k, rep] = this.longestRule(b, p);
    if (k) return [k, rep];
    const c = b[p];
    const len = c < 0x80 ? 1 : (c & 0xe0) === 0xc0 ? 2 : (c & 0xf0) === 0xe0 ? 3 : (c & 0xf8) === 0xf0 ? 4 : 0;
    if (!len || p + len > b.length || !utf8Valid(b.subarray(p, p + len))) return [1, FFFD];
    return [len, b.subarray(p, p + len)];
  }

  normalize(b) {
    const out = [];
    const ws = this.escapeWhitespaces ? WS : Buffer.from(' ');
    let p = 0;
    if (this.removeExtraWhitespaces)
      while (p < b.length) {
        const [k, rep] = this.normalizePrefix(b, p);
        if (!(rep.length === 1 && rep[0] === 0x20)) break;
        p += k;
      }
    if (p === b.length) return Uint8Array.from(out);
    if (this.addDummyPrefix) out.push(...ws);
    let prevSpace = this.removeExtraWhitespaces;
    while (p < b.length) {
      const [k, full] = this.normalizePrefix(b, p);
      let rep = full;
      while (prevSpace && rep.length && rep[0] === 0x20) rep = rep.subarray(1);
      if (rep.length) {
        for (const c of rep) {
          if (this.escapeWhitespaces && c === 0x20) out.push(...ws);
          else out.push(c);
        }
        prevSpace = rep[rep.length - 1] === 0x20;
      }
      p += k;
      if (!this.removeExtraWhitespaces) prevSpace = false;
    }
    if (this.removeExtraWhitespaces)
      while (out.length >= ws.length && ws.every((c, i) => out[out.length - ws.length + i] === c)) out.length -= ws.length;
    return Uint8Array.from(out);
  }

  // ---- segmentation: [start, id] of each piece of the normalised bytes (as Latin-1 text) ----
  unigram(text) {
    const size = text.length, best = Array.from({ length: size + 1 }, () => ({ id: -1, score: 0, start: -1 }));
    const unkScore = Math.fround(this.minScore - UNK_PENALTY);
    for (let start = 0; start < size;) {
      const here = best[start].score;
      const mblen = Math.min(oneCharLen(text.charCodeAt(start)), size - start);
      let single = false;
      for (let end = start + 1; end <= size && end - start <= this.maxPieceBytes; end++) {
        const id = this.find(text, start, end);
        if (id < 0 || this.type[id] === UNUSED) continue;
        const cand = Math.fround(this.score[id] + here), t = best[end];
        if (t.start === -1 || cand > t.score) best[end] = { id, score: cand, start };
        if (end - start === mblen) single = true;
      }
      if (!single) {
        const cand = Math.fround(unkScore + here), t = best[start + mblen];
        if (t.start === -1 || cand > t.score) best[start + mblen] = { id: this.unkId, score: cand, start };
      }
      start += mblen;
    }
    const seg = [];
    for (let end = size; end > 0; end = best[end].start) seg.push([best[end].start, best[end].id]);
    return seg.reverse();
  }

  // an unused piece back into the two it was merged from, found as the C code finds them
  resegment(text, start, len, seg) {
    const id = this.find(text, start, start + len);
    if (id < 0 || this.type[id] !== UNUSED) {
      seg.push([start, id < 0 ? this.unkId : id]);
      return;
    }
    for (let k = 1; k < len; k++) {
      if (this.find(text, start, start + k) >= 0 && this.find(text, start + k, start + len) >= 0) {
        this.resegment(text, start, k, seg);
        this.resegment(text, start + k, len - k, seg);
        return;
      }
    }
    seg.push([start, id]);
  }

  bpe(text) {
    const size = text.length, sy = [];
    for (let i = 0; i < size;) {
      const k = Math.min(oneCharLen(text.charCodeAt(i)), size - i);
      sy.push({ start: i, len: k, prev: sy.length - 1, next: i + k < size ? sy.length + 1 : -1 });
      i += k;
    }
    const q = binaryHeap((a, b) => (a.score !== b.score ? a.score > b.score : a.left < b.left));
    const maybe = (l, r) => {
      if (l < 0 || r < 0) return;
      const len = sy[l].len + sy[r].len;
      if (len > this.maxPieceBytes) return;
      const id = this.find(text, sy[l].start, sy[l].start + len);
      if (id >= 0) q.push({ score: this.score[id], left: l, right: r, size: len });
    };
    for (let i = 1; i < sy.length; i++) maybe(i - 1, i);
    while (q.size) {
      const t = q.pop(), L = sy[t.left], R = sy[t.right];
      if (!L.len || !R.len || L.len + R.len !== t.size) continue; // stale
      L.len += R.len;
      L.next = R.next;
      if (R.next >= 0) sy[R.next].prev = t.left;
      R.len = 0;
      maybe(L.prev, t.left);
      maybe(t.left, L.next);
    }
    const seg = [];
    for (let i = sy.length ? 0 : -1; i >= 0; i = sy[i].next) this.resegment(text, sy[i].start, sy[i].len, seg);
    return seg;
  }

  // a line's bytes → its output pieces [start, end, id] over the normalised bytes: a run of
  // unknown pieces is one, or with byte fallback each byte of it one piece
  units(line) {
    const norm = this.normalize(line), text = key(norm);
    const seg = this.modelType === 2 ? this.bpe(text) : this.unigram(text);
    const units = [];
    let prevUnk = false;
    seg.forEach(([a, id], i) => {
      const e = i + 1 < seg.length ? seg[i + 1][0] : norm.length, unk = id === this.unkId;
      if (unk && this.byteFallback) {
        for (let j = a; j < e; j++) units.push([j, j + 1, this.byteId[norm[j]] >= 0 ? this.byteId[norm[j]] : this.unkId]);
      } else if (unk && prevUnk) units[units.length - 1][1] = e;
      else units.push([a, e, id]);
      prevUnk = unk;
    });
    return { norm, units };
  }

  encodeIds(line) { return this.units(line).units.map((u) => u[2]); }

  // pieces as ./subword encode writes them (a byte piece's name, the unknown's text as it is)
  encodePieces(line) {
    const { norm, units } = this.units(line);
    const out = units.map(([a, e, id]) => Buffer.from(this.type[id] === BYTE ? this.bytes[id] : norm.subarray(a, e)));
    return Buffer.concat(out.flatMap((p, i) => (i ? [Buffer.from(' '), p] : [p])));
  }

  pieceId(p) {
    const k = key(p);
    return this.index.get(k) ?? this.others.get(k) ?? this.unkId;
  }

  // space-separated pieces (bytes) → text (bytes), as spm_decode
  decodePieces(text) {
    const out = [], bytes = [];
    const flush = () => {
      for (let i = 0; i < bytes.length;) {
        let take = 0;
        for (let w = 4; w >= 1 && !take; w--) if (i + w <= bytes.length && utf8Valid(bytes.slice(i, i + w))) take = w;
        if (take) out.push(...bytes.slice(i, i + take));
        else out.push(...FFFD);
        i += take || 1;
      }
      bytes.length = 0;
    };
    let bosWs = true, bosSeen = false;
    const dropFirst = this.addDummyPrefix || this.removeExtraWhitespaces;
    for (let p = 0; p < text.length;) {
      while (text[p] === 0x20) p++;
      let e = p;
      while (e < text.length && text[e] !== 0x20) e++;
      if (e === p) break;
      const piece = text.subarray(p, e), id = this.pieceId(piece), t = this.type[id];
      p = e;
      if (t === BYTE && bytes.length < 256) {
        bytes.push(parseInt(/^<0x([0-9A-Fa-f]{1,2})/.exec(this.piece[id])?.[1] ?? '0', 16));
        continue;
      }
      flush();
      if (bosSeen || out.length) bosWs = false;
      if (t === CONTROL) bosSeen = false;
      else if (id === this.unkId) {
        out.push(...(key(piece) === key(this.bytes[id]) ? this.unkSurface : piece)); // text the model lacks: as it is
        bosSeen = false;
      } else {
        let q = 0;
        bosSeen = false;
        if (bosWs && dropFirst && piece.length >= 3 && WS.every((c, i) => piece[i] === c)) {
          q = 3;
          bosSeen = !this.removeExtraWhitespaces;
        }
        while (q < piece.length) {
          if (piece.length - q >= 3 && WS.every((c, i) => piece[q + i] === c)) out.push(0x20), q += 3;
          else out.push(piece[q++]);
        }
      }
    }
    flush();
    return Buffer.from(out);
  }
}

// s2s's ids over a SentencePiece model (src/text/subword_model.c): the specials, then the pieces
// in order; the model's unknown piece is <unk> (1), a piece spelled as a special is that special
class SpmText {
  constructor(data, vocab) {
    this.spm = new Spm(data);
    const at = new Map();
    vocab.forEach((t, i) => { if (!at.has(t)) at.set(t, i); });
    this.toVocab = this.spm.piece.map((p, i) => {
      if (i === this.spm.unkId) return 1;
      const v = at.get(p);
      if (v === undefined) throw new Error(`spm: piece "${p}" is not in the model's vocabulary (not its SentencePiece model)`);
      return v;
    });
    this.fromVocab = new Int32Array(vocab.length).fill(-1);
    for (let i = this.spm.piece.length - 1; i >= 0; i--) this.fromVocab[this.toVocab[i]] = i; // the first spelling wins
    this.fromVocab[1] = this.spm.unkId;
  }

  encode(bytes) { return this.spm.encodeIds(bytes).map((i) => this.toVocab[i]); }

  decode(ids) {
    const pieces = [];
    for (const v of ids) {
      const s = v >= 0 && v < this.fromVocab.length ? this.fromVocab[v] : -1;
      if (s >= 0) pieces.push(Buffer.from(this.spm.bytes[s])); // <pad>, <sos>, <eos>: nothing
    }
    return this.spm.decodePieces(Buffer.concat(pieces.flatMap((p, i) => (i ? [Buffer.from(' '), p] : [p])))).toString('utf8');
  }
}

module.exports = { Spm, SpmText };

if (require.main === module) {
  const [mode, model] = process.argv.slice(2);
  if (!['encode', 'decode'].includes(mode) || !model) {
    process.stderr.write('usage: node scripts/onnx/spm.js encode|decode MODEL < lines\n');
    process.exit(2);
  }
  let s;
  try { s = new Spm(require('fs').readFileSync(model)); } catch (e) {
    process.stderr.write(`spm.js: ${model}: ${e.message}\n`);
    process.exit(1);
  }
  const input = require('fs').readFileSync(0);
  const lines = [];
  for (let p = 0; p < input.length;) {
    let e = input.indexOf(0x0a, p);
    if (e < 0) e = input.length;
    lines.push(input.subarray(p, e));
    p = e + 1;
  }
  const out = lines.map((l) => (mode === 'encode' ? s.encodePieces(l) : s.decodePieces(l)));
  process.stdout.write(Buffer.concat(out.flatMap((b) => [b, Buffer.from('\n')])));
}
