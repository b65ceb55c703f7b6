#!/usr/bin/env node
// The reference decoder of s2s's ONNX export, on ONNX Runtime (onnxruntime-node): it decodes as
// ./translate does (docs/numerics.md, "Decoding"), from the files `./export --format onnx` writes.
//
//   node scripts/onnx/translate.js DIR [--input FILE] [--beam K] [--alpha A] [--n-best N]
//        [--max-len N] [--batch N] [--threads N] [--ids] [--check-logits FILE]
//
// Reads one source per line (standard input by default), writes one output per line. The text is
// read as the model's task reads it (s2s.json "text.kind"): characters (reversal), words (already
// tokenised, as ./translate --tokenized), or the pieces of raw text of the model's BPE or
// SentencePiece model. --ids reads and writes token ids instead (space-separated).
// --check-logits FILE takes the JSON lines of ./translate --score --logits and prints the largest
// difference between its logits and ONNX Runtime's.
// Not part of s2s's own path: an example, a check and a benchmark (docs/how-to/onnx.md).
'use strict';
const fs = require('fs');
const path = require('path');
const { utf8Valid } = require('./bpe.js');
let ort;
try { ort = require('onnxruntime-node'); } catch (e) {
  process.stderr.write('translate.js: onnxruntime-node is not installed: cd scripts/onnx && npm install --ignore-scripts\n');
  process.exit(1);
}

const FORMAT_VERSION = 2;

function usage(msg) {
  process.stderr.write(`translate.js: ${msg}\nusage: node scripts/onnx/translate.js DIR [--input FILE] [--beam K] ` +
    '[--alpha A] [--n-best N] [--max-len N] [--batch N] [--threads N] [--ids] [--check-logits FILE]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const o = { dir: null, input: '-', beam: 1, alpha: null, nbest: 0, maxLen: 0, batch: 64, threads: 0, ids: false,
    checkLogits: null };
  const num = (k, v, min) => {
    const x = Number(v);
    if (v === undefined || !Number.isFinite(x) || x < min) usage(`${k}: expected a number of at least ${min}, got ${v}`);
    return x;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    switch (a) {
      case '--input': o.input = argv[++i]; if (o.input === undefined) usage('--input: a file'); break;
      case '--beam': o.beam = num(a, argv[++i], 1) | 0; break;
      case '--alpha': o.alpha = num(a, argv[++i], 0); break;
      case '--n-best': o.nbest = num(a, argv[++i], 1) | 0; break;
      case '--max-len': o.maxLen = num(a, argv[++i], 1) | 0; break;
      case '--batch': o.batch = num(a, argv[++i], 1) | 0; break;
      case '--threads': o.threads = num(a, argv[++i], 0) | 0; break;
      case '--ids': o.ids = true; break;
      case '--check-logits': o.checkLogits = argv[++i]; if (o.checkLogits === undefined) usage('--check-logits: a file'); break;
      case '--help': case '-h': usage('decodes with an s2s ONNX export');
      default:
        if (a.startsWith('-') || o.dir) usage(`unknown argument ${a}`);
        o.dir = a;
    }
  }
  if (!o.dir) usage('the export folder (./export MODEL --format onnx --out DIR) is required');
  if (o.nbest > o.beam) usage('--n-best: at most --beam');
  return o;
}

function fail(msg) {
  process.stderr.write(`translate.js: ${msg}\n`);
  process.exit(1);
}

// ---- the export ----
function loadMeta(dir) {
  const file = path.join(dir, 's2s.json');
  let meta;
  try { meta = JSON.parse(fs.readFileSync(file, 'utf8')); } catch (e) { fail(`${file}: ${e.message}`); }
  if (meta.format !== 's2s-onnx') fail(`${file}: not an s2s ONNX export (format "${meta.format}")`);
  if (meta.format_version !== FORMAT_VERSION)
    fail(`${file}: export format ${meta.format_version}; this decoder reads format ${FORMAT_VERSION} ` +
      '(export the model again with this s2s, or use the decoder of the s2s that exported it)');
  return meta;
}

async function openModel(dir, threads) {
  const meta = loadMeta(dir);
  const opt = { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all' };
  const enc = await ort.InferenceSession.create(path.join(dir, meta.encoder), opt);
  const dec = await ort.InferenceSession.create(path.join(dir, meta.decoder), opt);
  const text = new Text(meta, dir);
  return { meta, enc, dec, text };
}

// ---- text ↔ ids, as the task reads and writes it ----
class Text {
  constructor(meta, dir) {
    this.kind = meta.text.kind;
    this.markers = meta.text.source_markers;
    this.src = new Map(meta.src_vocab.map((t, i) => [t, i]));
    this.trgTokens = meta.trg_vocab;
    if (this.kind === 'bpe' || this.kind === 'sentencepiece') {
      const file = (name) => path.join(dir, name);
      const make = this.kind === 'bpe'
        ? (name, vocab) => new (require('./bpe.js').Bpe)(fs.readFileSync(file(name), 'utf8'), vocab)
        : (name, vocab) => new (require('./spm.js').SpmText)(fs.readFileSync(file(name)), vocab);
      try {
        this.subSrc = make(meta.text.subword, meta.src_vocab);
        this.subTrg = meta.text.subword_trg ? make(meta.text.subword_trg, meta.trg_vocab)
          : make(meta.text.subword, meta.trg_vocab);
      } catch (e) { fail(`${dir}: ${e.message}`); }
    }
  }

  // a line (its bytes) → source ids; throws with a message for a line the model cannot read
  encode(bytes, ids) {
    if (ids) return bytes.toString('utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    if (this.kind !== 'characters' && !utf8Valid(bytes)) throw new Error('not valid UTF-8');
    const line = bytes.toString('utf8');
    switch (this.kind) {
      case 'characters': {
        const out = [];
        for (const ch of bytes) {
          const id = this.src.get(String.fromCharCode(ch));
          if (id === undefined) throw new Error(`byte 0x${ch.toString(16).padStart(2, '0')} is not in the model's alphabet`);
          out.push(id);
        }
        return this.markers ? [2, ...out, 3] : out;
      }
      case 'words': return line.split(/[ \t\r\n\f\v]+/).filter(Boolean).map((w) => this.src.get(w) ?? 1);
      case 'bpe': return this.subSrc.encode(line);
      case 'sentencepiece': return this.subSrc.encode(bytes);
      default: throw new Error(`text kind "${this.kind}": use --ids`);
    }
  }

  decode(ids, asIds) {
    if (asIds) return ids.join(' ');
    switch (this.kind) {
      case 'characters': return ids.map((i) => this.trgTokens[i]).join('');
      case 'bpe': case 'sentencepiece': return this.subTrg.decode(ids);
      default: return ids.map((i) => this.trgTokens[i]).join(' ');
    }
  }
}

// ---- tensors ----
const f32 = (data, dims) => new ort.Tensor('float32', data, dims);
const i64 = (arr, dims) => new ort.Tensor('int64', BigInt64Array.from(arr, (x) => BigInt(x)), dims);

// rows of t along axis, in the order given (beam search's reordering, greedy's compaction)
function gather(t, axis, rows) {
  const d = t.dims, outer = d.slice(0, axis).reduce((a, b) => a * b, 1);
  const inner = d.slice(axis + 1).reduce((a, b) => a * b, 1), n = d[axis];
  const out = new Float32Array(outer * rows.length * inner);
  for (let o = 0; o < outer; o++)
    for (let r = 0; r < rows.length; r++)
      out.set(t.data.subarray((o * n + rows[r]) * inner, (o * n + rows[r] + 1) * inner), (o * rows.length + r) * inner);
  const dims = d.slice();
  dims[axis] = rows.length;
  return f32(out, dims);
}

async function encode(m, srcs) {
  const B = srcs.length, S = Math.max(...srcs.map((s) => s.length));
  const ids = new Array(B * S).fill(0);
  srcs.forEach((s, b) => s.forEach((id, t) => { ids[b * S + t] = id; }));
  return m.enc.run({ src: i64(ids, [B, S]), src_len: i64(srcs.map((s) => s.length), [B]) });
}

// the decoder's feeds: the state and memories of the rows given, from where they are now
function Rows(m, encOut) {
  const t = m.meta.tensors;
  this.state = Object.fromEntries(t.state.map((s) => [s.name, encOut[s.name]]));
  this.encoded = Object.fromEntries(t.memory.map((s) => [s.name, encOut[s.name]]));
  this.memory = { ...this.encoded }; // the memories of the decoder's rows
  this.memMap = null;         // the encoder's row of each decoder row (null: the same row)
  this.pick = null;           // the state's row of each decoder row at the next step (null: the same row)
}

// one decoder step for the rows' tokens: the output want (logits, or beam search's log_probs);
// the graph picks the state's rows itself (its rows input), as the last step left them
async function step(m, rows, tokens, want = 'logits') {
  const pick = rows.pick ?? tokens.map((_, i) => i);
  const feeds = { y: i64(tokens, [tokens.length]), rows: i64(pick, [pick.length]) };
  rows.pick = null;
  for (const s of m.meta.tensors.state) feeds[s.name] = rows.state[s.name];
  for (const s of m.meta.tensors.memory) feeds[s.name] = rows.memory[s.name];
  const out = await m.dec.run(feeds, [want, ...m.meta.tensors.state.map((s) => `${s.name}_out`)]);
  for (const s of m.meta.tensors.state) rows.state[s.name] = out[`${s.name}_out`];
  return out[want];
}

// the decoder's next rows: the state of rows pick (gathered by the next step's graph), the
// memories of encoder rows encRows
function reorder(m, rows, pick, encRows) {
  rows.pick = pick;
  const same = rows.memMap && rows.memMap.length === encRows.length && rows.memMap.every((x, i) => x === encRows[i]);
  if (same) return;
  for (const s of m.meta.tensors.memory) rows.memory[s.name] = gather(rows.encoded[s.name], s.batch_axis, encRows);
  rows.memMap = encRows;
}

function maxLen(m, opt, src) {
  if (opt.maxLen) return opt.maxLen;
  const cfg = m.meta.decoding.max_decode_len;
  return cfg > 0 ? cfg : 2 * src.length + 10;
}

// ---- greedy: the highest logit, the lowest id among equals, never <pad> or <sos> ----
async function greedy(m, opt, srcs) {
  const encOut = await encode(m, srcs);
  const rows = new Rows(m, encOut), V = m.meta.trg_vocab.length;
  const outs = srcs.map(() => []), limit = srcs.map((s) => maxLen(m, opt, s));
  let live = srcs.map((_, i) => i), tokens = live.map(() => 2);
  for (let t = 0; live.length; t++) {
    const logits = (await step(m, rows, tokens)).data;
    const keep = [], next = [];
    live.forEach((b, r) => {
      let best = -1, bv = -Infinity;
      for (let v = 0; v < V; v++) {
        const x = logits[r * V + v];
        if (v !== 0 && v !== 2 && !Number.isNaN(x) && (best < 0 || x > bv)) best = v, bv = x;
      }
      if (best < 0) best = 3; // every logit NaN: nothing to write
      if (best === 3 || outs[b].length + 1 > limit[b]) return;
      outs[b].push(best);
      if (outs[b].length < limit[b]) keep.push(r), next.push(best);
    });
    const all = keep.length === live.length; // no sentence ended: the rows stay as they are
    live = keep.map((r) => live[r]);
    tokens = next;
    if (live.length && !all) reorder(m, rows, keep, live);
  }
  return outs.map((o) => [{ ids: o, score: null }]);
}

// ---- beam search: fairseq's rules, as numerics.md gives them ----
async function beam(m, opt, srcs) {
  const K = opt.beam, alpha = opt.alpha ?? m.meta.decoding.alpha;
  const encOut = await encode(m, srcs);
  const rows = new Rows(m, encOut), V = m.meta.trg_vocab.length, C = Math.min(2 * K, V);
  const sent = srcs.map((s, b) => ({ b, limit: maxLen(m, opt, s), live: [{ ids: [], score: 0 }], fin: [], done: false }));
  const finish = (s, ids, score, ended) => {
    const n = ids.length + (ended ? 1 : 0);
    s.fin.push({ ids, score, norm: Math.fround(score / Math.fround(Math.pow(Math.max(n, 1), alpha))), len: ids.length });
  };
  let order = sent.map((s) => ({ s, k: 0 })); // the decoder's rows: a sentence's live hypotheses, in slot order
  let tokens = order.map(() => 2);
  while (order.length) {
    const lp = (await step(m, rows, tokens, 'log_probs')).data; // the graph's log-softmax
    const offers = new Map();
    order.forEach(({ s, k }, r) => {
      const base = s.live[k].score, off = r * V, top = [];
      let bar = -Infinity; // once C are kept: the C-th's log-probability; score + lp rises with lp
      for (let v = 0; v < V; v++) {
        const x = lp[off + v];
        if (!(x > bar) || v === 0 || v === 2) continue;
        const sc = Math.fround(base + x);
        if (top.length === C && !(sc > top[C - 1].score)) continue;
        let i = top.length;
        while (i > 0 && !(top[i - 1].score >= sc)) i--;
        top.splice(i, 0, { score: sc, slot: k, token: v, row: r, x });
        if (top.length > C) top.pop();
        if (top.length === C) bar = top[C - 1].x;
      }
      if (!offers.has(s)) offers.set(s, []);
      offers.get(s).push(...top);
    });
    const pick = [], mem = [], nextOrder = [];
    for (const [s, list] of offers) {
      list.sort((a, b) => (b.score - a.score) || (a.slot - b.slot) || (a.token - b.token));
      const live = [];
      list.forEach((c, j) => {
        if (live.length >= K) return;
        const prefix = s.live[c.slot].ids;
        if (c.token === 3) { if (j < K) finish(s, prefix, c.score, true); return; }
        live.push({ ids: [...prefix, c.token], score: c.score, row: c.row });
      });
      if (s.fin.length >= K || !live.length) { s.done = true; continue; }
      if (live[0].ids.length >= s.limit) { live.forEach((h) => finish(s, h.ids, h.score, false)); s.done = true; continue; }
      s.live = live;
      live.forEach((h, k) => {
        pick.push(h.row);
        mem.push(s.b);
        nextOrder.push({ s, k });
      });
    }
    order = nextOrder;
    tokens = order.map(({ s, k }) => s.live[k].ids[s.live[k].ids.length - 1]);
    if (order.length) reorder(m, rows, pick, mem);
  }
  return sent.map((s) => {
    s.fin.sort((a, b) => (b.norm - a.norm) || (a.len - b.len));
    return s.fin;
  });
}

// ---- logits against ./translate --score --logits ----
async function checkLogits(m, file) {
  let worst = 0, count = 0, lines = 0;
  const V = m.meta.trg_vocab.length;
  const rl = require('readline').createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
  for await (const l of rl) { // a line at a time: a vocabulary of 10,000 makes these files large
    if (!l) continue;
    const x = JSON.parse(l);
    lines++;
    const encOut = await encode(m, [x.src]);
    const rows = new Rows(m, encOut);
    let y = 2;
    for (let i = 0; i < x.trg.length; i++) {
      const z = (await step(m, rows, [y])).data;
      for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(z[v] - x.logits[i][v]));
      y = x.trg[i];
      count++;
    }
  }
  process.stdout.write(`lines ${lines} tokens ${count} max_abs_diff ${worst.toExponential(3)}\n`);
}

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  const m = await openModel(opt.dir, opt.threads);
  if (opt.checkLogits) return checkLogits(m, opt.checkLogits);
  const input = fs.readFileSync(opt.input === '-' ? 0 : opt.input), lines = [];
  for (let p = 0; p < input.length;) { // lines as bytes: a line that is not UTF-8 is refused, as ./translate does
    let e = input.indexOf(0x0a, p);
    if (e < 0) e = input.length;
    lines.push(input.subarray(p, e > p && input[e - 1] === 0x0d ? e - 1 : e));
    p = e + 1;
  }
  const out = [];
  for (let i = 0; i < lines.length; i += opt.batch) {
    const chunk = lines.slice(i, i + opt.batch), srcs = [], at = [];
    chunk.forEach((l, j) => {
      let ids = [];
      try { ids = l.length ? m.text.encode(l, opt.ids) : []; } catch (e) {
        process.stderr.write(`translate.js: line ${i + j + 1}: ${e.message}\n`);
        process.exitCode = 1; // as ./translate: the other lines are translated, the run says one was not
      }
      if (ids.length) srcs.push(ids), at.push(j);
    });
    const res = srcs.length ? await (opt.beam > 1 ? beam(m, opt, srcs) : greedy(m, opt, srcs)) : [];
    const byLine = chunk.map(() => null);
    at.forEach((j, k) => { byLine[j] = res[k]; });
    byLine.forEach((hyps, j) => {
      if (opt.nbest) {
        (hyps || []).slice(0, opt.nbest).forEach((h) => out.push(`${i + j} ||| ${m.text.decode(h.ids, opt.ids)} ||| ` +
          `F0= ${h.score.toFixed(4)} ||| ${h.norm.toFixed(4)}`));
      } else out.push(hyps ? m.text.decode(hyps[0].ids, opt.ids) : '');
    });
  }
  process.stdout.write(out.length ? `${out.join('\n')}\n` : '');
}

main().catch((e) => fail(e.message));
