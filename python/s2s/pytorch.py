"""The PyTorch module of an s2s model: any exported model (./export, or s2s.export) rebuilt as
an nn.Module under the same parameter names, whose logits are ./translate --logits's and
whose greedy decoding is ./translate's. Needs PyTorch (Debian: python3-torch) only when
imported.

    from s2s import pytorch
    net = pytorch.load("runs/reverse/model.bin")    # or a .safetensors file
    logits = net.logits([4, 5, 6], [6, 5, 4, 3])     # (4, V): before each target token
    ids = net.greedy([4, 5, 6])

The families as the C library defines them (docs/engine.md, tests/golden/README.md):
  rnn: embedding → GRU/LSTM encoder over the real tokens (layers, bidirectional); the bridge
    ReLU(fc([h_fwd_last ; h_bwd_first])) per layer (an LSTM's cell at 0), or the encoder's
    final state; the decoder RNN over the whole target (no input feeding: a GRUCell's names
    with one layer, nn.GRU's with more); attention (dummy, meanpool, dot, scaled_dot, general,
    additive, multihead); the output layer over [context ; state] (concat) or
    tanh(W_c [context ; state]) (luong); one-hot embeddings, tied embeddings.
  transformer: token embeddings × √d plus positions (sinusoidal, or learned with positions
    past the table reading its last row), nn.Transformer (post- or pre-norm, ReLU or GELU),
    a linear generator; tied embeddings.
Decoding never writes <pad> or <sos>, as the C decoder; float32 by default (dtype=torch.float64
for a reference)."""

import json
import math
import os
import struct
import tempfile

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, UNK, SOS, EOS = 0, 1, 2, 3
_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    """(tensors by name, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its header's length)")
    n = struct.unpack("<Q", raw[:8])[0]
    if n > len(raw) - 8:
        raise ValueError(f"{path}: not a safetensors file (a header of {n} bytes in a file of {len(raw)})")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if e["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']} (F32, BF16 or F16 expected)")
        s, t = e["data_offsets"]
        x = torch.frombuffer(bytearray(data[s:t]), dtype=_DTYPES[e["dtype"]]) if t > s else torch.zeros(0)
        out[name] = x.reshape(e["shape"])
    return out, meta


def _tied(names, m, target_emb, source_emb, weight):
    """model.tie_embeddings: the tied embeddings are the output layer's weight in the file."""
    tie = m.get("tie_embeddings", "none")
    if tie != "none":
        names[target_emb] = weight
    if tie == "all":
        names[source_emb] = weight
    return names


# ---- the RNN family ----

class Attention(nn.Module):
    """model.attention over decoder states (T, B, Hd) and encoder states (S, B, D): the
    context (T, B, C) and the weights (B, T, S) (None for dummy)."""

    def __init__(self, kind, Hd, D, kq, heads):
        super().__init__()
        self.kind, self.kq = kind, kq
        if kind == "scaled_dot":
            self.W_q, self.W_k = nn.Linear(Hd, kq), nn.Linear(D, kq)
        elif kind == "general":
            self.W = nn.Linear(D, Hd, bias=False)
        elif kind == "additive":
            self.W_q, self.W_k = nn.Linear(Hd, kq, bias=False), nn.Linear(D, kq)
            self.v = nn.Parameter(torch.zeros(kq))
        elif kind == "multihead":
            self.mha = nn.MultiheadAttention(Hd, heads, kdim=D, vdim=D)
        elif kind not in ("dummy", "meanpool", "dot"):
            raise ValueError(f"model.attention {kind!r}: not an s2s attention")

    def _load_names(self, prefix):
        """Our parameter names → the file's (multihead sits directly under decoder.attention)."""
        return {k: prefix + (k[len("mha."):] if k.startswith("mha.") else k) for k in self.state_dict()}

    def forward(self, dec, enc, mask):
        T, B, _ = dec.shape
        S, _, D = enc.shape
        real = mask.t()  # (B, S)
        keys = enc.transpose(0, 1)  # (B, S, D)
        if self.kind == "dummy":
            return dec.new_zeros(T, B, D), None
        if self.kind == "meanpool":
            w = (real.to(enc.dtype) / real.sum(1, keepdim=True).clamp(min=1).to(enc.dtype)).unsqueeze(1).expand(B, T, S)
            return torch.bmm(w, keys).transpose(0, 1), w
        if self.kind == "multihead":
            ctx, w = self.mha(dec, enc, enc, key_padding_mask=~real, need_weights=True, average_attn_weights=True)
            return ctx, w
        q = dec.transpose(0, 1)  # (B, T, Hd)
        if self.kind == "dot":
            scores = torch.bmm(q, keys.transpose(1, 2))
        elif self.kind == "scaled_dot":
            scores = torch.bmm(self.W_q(q), self.W_k(keys).transpose(1, 2)) / math.sqrt(self.kq)
        elif self.kind == "general":
            scores = torch.bmm(q, self.W(keys).transpose(1, 2))
        else:  # additive
            scores = torch.tanh(self.W_q(q).unsqueeze(2) + self.W_k(keys).unsqueeze(1)) @ self.v  # (B, T, S)
        w = torch.softmax(scores.masked_fill(~real.unsqueeze(1), float("-inf")), dim=2)
        return torch.bmm(w, keys).transpose(0, 1), w


class RnnSeq2Seq(nn.Module):
    def __init__(self, m, V_src, V_trg):
        super().__init__()
        self.cfg = m
        cell, L, bi = m["cell"], m["layers"], m["bidirectional"]
        He, Hd = m["encoder_hidden"], m["decoder_hidden"]
        onehot = m.get("embedding_type", "learned") == "onehot"
        Es, Et = (V_src, V_trg) if onehot else (m["embedding"], m["embedding"])
        D = (2 if bi else 1) * He
        rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.encoder = nn.Module()
        self.encoder.embedding = nn.Embedding(V_src, Es)
        self.encoder.rnn = rnn(Es, He, num_layers=L, bidirectional=bi)
        if bi:
            self.encoder.fc = nn.Linear(D, Hd)
        self.decoder = nn.Module()
        self.decoder.embedding = nn.Embedding(V_trg, Et)
        if L == 1:
            self.decoder.rnn = (nn.GRUCell if cell == "gru" else nn.LSTMCell)(Et, Hd)
        else:
            self.decoder.rnn = rnn(Et, Hd, num_layers=L)
        self.decoder.attention = Attention(m["attention"], Hd, D, m.get("kq", 0), m.get("heads", 1))  # as they apply
        C = Hd if m["attention"] == "multihead" else D
        if m["combine"] == "luong":
            self.decoder.W_c = nn.Linear(C + Hd, Hd, bias=False)
            self.decoder.out = nn.Linear(Hd, V_trg)
        else:
            self.decoder.out = nn.Linear(C + Hd, V_trg)
        tie = m.get("tie_embeddings", "none")
        if tie != "none":
            self.decoder.embedding.weight = self.decoder.out.weight
        if tie == "all":
            self.encoder.embedding.weight = self.decoder.out.weight

    def file_names(self):
        """Our parameter names → the model file's (tied copies map to the tensor they share)."""
        out = {}
        for k in self.state_dict():
            if k.startswith("decoder.attention."):
                out[k] = self.decoder.attention._load_names("decoder.attention.")[k[len("decoder.attention."):]]
            else:
                out[k] = k
        return _tied(out, self.cfg, "decoder.embedding.weight", "encoder.embedding.weight", "decoder.out.weight")

    def encode(self, src, src_len):
        m, L = self.cfg, self.cfg["layers"]
        packed = pack_padded_sequence(self.encoder.embedding(src), src_len.cpu(), enforce_sorted=False)
        out, hidden = self.encoder.rnn(packed)
        enc, _ = pad_packed_sequence(out, total_length=src.shape[0])
        h, c = hidden if m["cell"] == "lstm" else (hidden, None)
        if m["bidirectional"]:
            h0 = torch.stack([torch.relu(self.encoder.fc(torch.cat([h[2 * l], h[2 * l + 1]], 1))) for l in range(L)])
            c0 = torch.zeros_like(h0) if c is not None else None
        else:
            h0, c0 = h, c
        return enc, h0, c0

    def decode(self, y, h0, c0):
        """The decoder RNN over inputs y (T, B, E) from (L, B, Hd) states: its top outputs."""
        if self.cfg["layers"] > 1:
            out, _ = self.decoder.rnn(y, (h0, c0) if c0 is not None else h0)
            return out
        h, c, outs = h0[0], (c0[0] if c0 is not None else None), []
        for t in range(y.shape[0]):
            if c is None:
                h = self.decoder.rnn(y[t], h)
            else:
                h, c = self.decoder.rnn(y[t], (h, c))
            outs.append(h)
        return torch.stack(outs)

    def forward(self, src, src_len, trg):
        """Teacher-forced logits (T-1, B, V) and attention (B, T-1, S) of trg (T, B) given src
        (S, B) of lengths src_len: inputs trg[0 .. T-2], as a training step."""
        enc, h0, c0 = self.encode(src, src_len)
        dec = self.decode(self.decoder.embedding(trg[:-1]), h0, c0)
        ctx, w = self.decoder.attention(dec, enc, src != PAD)
        both = torch.cat([ctx, dec], 2)
        if self.cfg["combine"] == "luong":
            both = torch.tanh(self.decoder.W_c(both))
        return self.decoder.out(both), w


# ---- the Transformer family ----

class TransformerSeq2Seq(nn.Module):
    def __init__(self, m, V_src, V_trg):
        super().__init__()
        self.cfg, d = m, m["d_model"]
        self.d = d
        self.src_embed = nn.Embedding(V_src, d)
        self.trg_embed = nn.Embedding(V_trg, d)
        if m["positions"] == "learned":
            self.src_pos = nn.Embedding(m["max_positions"], d)
            self.trg_pos = nn.Embedding(m["max_positions"], d)
        enc, dec = m.get("encoder_layers") or m["layers"], m.get("decoder_layers") or m["layers"]
        self.transformer = nn.Transformer(d, m["heads"], enc, dec, m["ff"], dropout=0.0,
                                          activation=m["activation"], norm_first=m["norm"] == "pre")
        self.generator = nn.Linear(d, V_trg)
        tie = m.get("tie_embeddings", "none")
        if tie != "none":
            self.trg_embed.weight = self.generator.weight
        if tie == "all":
            self.src_embed.weight = self.generator.weight

    def file_names(self):
        return _tied({k: k for k in self.state_dict()}, self.cfg, "trg_embed.weight", "src_embed.weight", "generator.weight")

    def positions(self, table, n, like):
        if table is not None:  # learned: past the table, its last row
            return table(torch.arange(n).clamp(max=table.num_embeddings - 1)).unsqueeze(1)
        pe = torch.zeros(n, self.d, dtype=torch.float64)
        at = torch.arange(n, dtype=torch.float64).unsqueeze(1)
        rate = torch.exp(-math.log(10000.0) * torch.arange(0, self.d, 2, dtype=torch.float64) / self.d)
        pe[:, 0::2] = torch.sin(at * rate)
        pe[:, 1::2] = torch.cos(at * rate)[:, : self.d // 2]
        return pe.float().to(like.dtype).unsqueeze(1)  # as the C library rounds them: float32

    def forward(self, src, src_len, trg):
        S, T1 = src.shape[0], trg.shape[0] - 1
        scale = math.sqrt(self.d)
        x = self.src_embed(src) * scale
        x = x + self.positions(getattr(self, "src_pos", None), S, x)
        y = self.trg_embed(trg[:-1]) * scale
        y = y + self.positions(getattr(self, "trg_pos", None), T1, y)
        src_pad = (src == PAD).t()
        causal = torch.triu(torch.full((T1, T1), float("-inf"), dtype=x.dtype), diagonal=1)
        out = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                               tgt_key_padding_mask=(trg[:-1] == PAD).t(), memory_key_padding_mask=src_pad)
        return self.generator(out), None  # nn.Transformer keeps no attention weights


# ---- loading, logits, greedy decoding ----

class S2sModule(nn.Module):
    """An s2s model in PyTorch: net(src, src_len, trg) → (logits (T-1, B, V), attention);
    .logits(src_ids, trg_ids) for one pair as ./translate --logits; .greedy(src_ids)."""

    def __init__(self, config, src_vocab, trg_vocab):
        super().__init__()
        self.config, self.src_vocab, self.trg_vocab = config, src_vocab, trg_vocab
        m = config["model"]
        family = RnnSeq2Seq if m.get("type", "rnn") == "rnn" else TransformerSeq2Seq
        self.net = family(m, len(src_vocab), len(trg_vocab))

    def forward(self, src, src_len, trg):
        return self.net(src, src_len, trg)

    def load_tensors(self, tensors, origin="the file"):
        names = self.net.file_names()
        own = self.net.state_dict(keep_vars=True)
        missing = sorted({f for f in names.values() if f not in tensors})
        if missing:
            raise ValueError(f"{origin}: no tensor {missing[0]} (a model of another architecture?)")
        unused = sorted(set(tensors) - set(names.values()))
        if unused:
            raise ValueError(f"{origin}: a tensor {unused[0]} this architecture has not")
        with torch.no_grad():
            for k, p in own.items():
                t = tensors[names[k]]
                if tuple(t.shape) != tuple(p.shape):
                    raise ValueError(f"{origin}: {names[k]} is {tuple(t.shape)}, the model's {tuple(p.shape)}")
                p.copy_(t.to(p.dtype))

    def logits(self, src_ids, trg_ids):
        """The logits before each of trg_ids (n, V): trg_ids as ./translate --logits's "trg"
        (the target's ids, <eos> last), src_ids as its "src"."""
        dev = next(self.parameters()).device
        src = torch.tensor(list(src_ids), dtype=torch.long, device=dev).unsqueeze(1)
        trg = torch.tensor([SOS] + list(trg_ids), dtype=torch.long, device=dev).unsqueeze(1)
        with torch.no_grad():
            out, _ = self(src, torch.tensor([src.shape[0]]), trg)
        return out.squeeze(1)

    def greedy(self, src_ids, max_len=None):
        """Greedy decoding as ./translate's: the output ids without <eos>; never <pad> or <sos>;
        at most max_len tokens (default: train.max_decode_len, else 2 × the source + 10)."""
        cap = max_len or self.config.get("train", {}).get("max_decode_len", 0) or 2 * len(src_ids) + 10
        ys = []
        for _ in range(cap):
            row = self.logits(src_ids, ys + [EOS])[-1].clone()
            row[PAD] = row[SOS] = float("-inf")
            nxt = int(row.argmax())
            if nxt == EOS:
                break
            ys.append(nxt)
        return ys

    def tokens(self, ids):
        return [self.trg_vocab[i] for i in ids]


def load(path, dtype=torch.float32):
    """The nn.Module (eval mode) of an s2s model: a safetensors file ./export wrote, or a model
    file (model.bin, exported first through the library)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) == 8 and struct.unpack("<Q", head)[0] < (1 << 32):  # a safetensors header's length
        tensors, meta = read_safetensors(path)
    else:
        from .tools import export  # the model file through the C library's exporter
        with tempfile.TemporaryDirectory() as tmp:
            tensors, meta = read_safetensors(export(path, os.path.join(tmp, "model.safetensors")))
    for key in ("s2s.config", "s2s.src_vocab", "s2s.trg_vocab"):
        if key not in meta:
            raise ValueError(f"{path}: no {key} in the metadata: not a model ./export wrote")
    net = S2sModule(json.loads(meta["s2s.config"]), json.loads(meta["s2s.src_vocab"]), json.loads(meta["s2s.trg_vocab"]))
    net.to(dtype)
    net.load_tensors(tensors, path)
    return net.eval()
