#!/usr/bin/env python3
"""The base golden cases (README.md here): the course's RNN encoder-decoders, the GRU and LSTM
cells and the worked attention exercises, computed by PyTorch in float64.

Test data generator, not part of the product; tests/golden-extra/make_extra.py builds on its
modules. Run: /usr/bin/python3 tests/golden/make_base.py [OUT_DIR]   (Debian's python3-torch)
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
PAD, UNK, SOS, EOS = 0, 1, 2, 3


def listed(t):
    return t.detach().tolist()


class Encoder(nn.Module):
    """Embedding, then a GRU or LSTM over each sentence's real tokens (a backward direction
    starts at its last real token); outputs at pads are 0. Its state for the decoder:
    bidirectional, ReLU(fc([h_fwd_last ; h_bwd_first])) (an LSTM's cell 0); else the last."""

    def __init__(self, vocab, emb, hid, cell, bidirectional, dec_hid):
        super().__init__()
        self.cell, self.bidirectional = cell, bidirectional
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(emb, hid, bidirectional=bidirectional)
        if bidirectional:
            self.fc = nn.Linear(2 * hid, dec_hid)

    def forward(self, src, lengths):
        S, B = src.shape
        outs, finals = [], []
        for b in range(B):  # one sentence at a time: its real tokens and nothing else
            n = int(lengths[b])
            out, last = self.rnn(self.embedding(src[:n, b]).unsqueeze(1))
            outs.append(torch.cat([out[:, 0], out.new_zeros(S - n, out.shape[2])]))
            finals.append(last)
        enc = torch.stack(outs, 1)  # [S, B, D]
        h = torch.cat([f[0] if self.cell == "lstm" else f for f in finals], 1)  # [dirs, B, H]
        if self.bidirectional:
            init = torch.relu(self.fc(torch.cat([h[0], h[1]], 1)))
            return enc, init if self.cell == "gru" else (init, torch.zeros_like(init))
        if self.cell == "gru":
            return enc, h[0]
        return enc, (h[0], torch.cat([f[1] for f in finals], 1)[0])


class Attention(nn.Module):
    """The variants' weights over the encoder outputs (pads excluded) and their weighted sum."""

    def __init__(self, kind, dec_hid, enc_dim, kq):
        super().__init__()
        self.kind, self.kq = kind, kq
        if kind == "scaled_dot":
            self.W_q = nn.Linear(dec_hid, kq)
            self.W_k = nn.Linear(enc_dim, kq)

    def scores(self, h, enc):  # [B, S]
        if self.kind == "dot":
            return torch.einsum("sbd,bd->bs", enc, h)
        return torch.einsum("sbk,bk->bs", self.W_k(enc), self.W_q(h)) / math.sqrt(self.kq)

    def forward(self, h, enc, mask):  # h [B, Hd]; enc [S, B, D]; mask [S, B], true at real tokens
        real = mask.t().to(enc.dtype)
        if self.kind == "dummy":
            return enc.new_zeros(enc.shape[1], enc.shape[2]), None
        if self.kind == "meanpool":
            w = real / real.sum(1, keepdim=True)
        else:
            w = torch.softmax(self.scores(h, enc).masked_fill(real == 0, float("-inf")), 1)
        return torch.einsum("bs,sbd->bd", w, enc), w


class Decoder(nn.Module):
    """Teacher forcing: h_i = cell(embedding(trg[i]), h_{i-1}); a_i = attention(h_i); logits
    from [a_i ; h_i] (concat) or from tanh(W_c [a_i ; h_i]) (luong)."""

    def __init__(self, vocab, emb, hid, enc_dim, cell, attention, kq, combine):
        super().__init__()
        self.cell, self.combine = cell, combine
        self.embedding = nn.Embedding(vocab, emb)
        self.rnn = (nn.GRUCell if cell == "gru" else nn.LSTMCell)(emb, hid)
        self.attention = Attention(attention, hid, enc_dim, kq)
        if combine == "concat":
            self.out = nn.Linear(enc_dim + hid, vocab)
        else:
            self.W_c = nn.Linear(enc_dim + hid, hid, bias=False)
            self.out = nn.Linear(hid, vocab)

    def forward(self, trg, enc, mask, state):
        logits, weights = [], []
        for i in range(trg.shape[0] - 1):
            state = self.rnn(self.embedding(trg[i]), state)
            h = state[0] if self.cell == "lstm" else state
            a, w = self.attention(h, enc, mask)
            both = torch.cat([a, h], 1)
            logits.append(self.out(both if self.combine == "concat" else torch.tanh(self.W_c(both))))
            weights.append(w)
        return torch.stack(logits), weights


class Seq2Seq(nn.Module):
    def __init__(self, c):
        super().__init__()
        enc_dim = c["enc_hid"] * (2 if c["bidirectional"] else 1)
        self.encoder = Encoder(c["src_vocab"], c["emb"], c["enc_hid"], c["cell"], c["bidirectional"], c["dec_hid"])
        self.decoder = Decoder(c["trg_vocab"], c["emb"], c["dec_hid"], enc_dim, c["cell"], c["attention"], c["kq"],
                               c["combine"])

    def forward(self, src, lengths, trg):
        enc, state = self.encoder(src, lengths)
        return self.decoder(trg, enc, src != PAD, state)


def padded(gen, vocab, lengths, marked):
    """[T, B] ids drawn from gen, a column per length (<sos> … <eos> inside it when marked)."""
    x = torch.full((max(lengths), len(lengths)), PAD, dtype=torch.long)
    for b, n in enumerate(lengths):
        words = torch.randint(4, vocab, (n - 2 if marked else n,), generator=gen)
        x[:n, b] = torch.cat([torch.tensor([SOS]), words, torch.tensor([EOS])]) if marked else words
    return x


def model_case(name, c, seed):
    """A model's weights drawn uniformly in ±0.5, a batch, and the loss, logits, attention and
    gradients of teacher forcing (cross-entropy over the real target tokens)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Seq2Seq(c)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.5, 0.5, generator=gen)
    src = padded(gen, c["src_vocab"], c["src_len"], False)
    trg = padded(gen, c["trg_vocab"], c["trg_len"], True)
    logits, weights = model(src, torch.tensor(c["src_len"]), trg)
    loss = F.cross_entropy(logits.reshape(-1, c["trg_vocab"]), trg[1:].reshape(-1), ignore_index=PAD)
    loss.backward()
    case = {"name": name, "config": c, "special_ids": {"pad": PAD, "unk": UNK, "sos": SOS, "eos": EOS},
            "src": listed(src.t()), "trg": listed(trg.t()), "loss": loss.item(), "logits": listed(logits.transpose(0, 1)),
            "params": {k: listed(p) for k, p in model.named_parameters()},
            "grads": {k: listed(p.grad) for k, p in model.named_parameters()}}
    if weights[0] is not None:
        case["attention"] = listed(torch.stack(weights).transpose(0, 1))  # [B, T-1, S]
    return case


def cell_case(cell, seed, B=3, I=4, H=5):
    """One step of nn.GRUCell / nn.LSTMCell and the gradients of a weighted sum of its outputs."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    m = (nn.GRUCell if cell == "gru" else nn.LSTMCell)(I, H)
    with torch.no_grad():
        for p in m.parameters():
            p.uniform_(-0.8, 0.8, generator=gen)

    def draw(rows, cols, grad=False):
        t = torch.empty(rows, cols).uniform_(-1, 1, generator=gen)
        return t.requires_grad_() if grad else t

    x, h, up = draw(B, I, True), draw(B, H, True), draw(B, H)
    case = {"name": cell + "_cell", "x": listed(x), "h": listed(h)}
    inputs = {"x": x, "h": h}
    if cell == "gru":
        h2 = m(x, h)
        (h2 * up).sum().backward()
        case.update(h_next=listed(h2), upstream=listed(up), loss_definition="sum(h_next * upstream)")
    else:
        c = draw(B, H, True)
        up_c = draw(B, H)
        h2, c2 = m(x, (h, c))
        ((h2 * up).sum() + (c2 * up_c).sum()).backward()
        case.update(c=listed(c), h_next=listed(h2), c_next=listed(c2), upstream_h=listed(up), upstream_c=listed(up_c),
                    loss_definition="sum(h_next * upstream_h) + sum(c_next * upstream_c)")
        inputs["c"] = c
    case["params"] = {k: listed(p) for k, p in m.named_parameters()}
    case["grads"] = {k: listed(p.grad) for k, p in m.named_parameters()}
    case["grads"].update({k: listed(v.grad) for k, v in inputs.items()})
    return case


def exercises():
    """The course's worked attention examples (../seeds), exactly: scores, row-wise softmax
    weights and outputs, a two-head output and a causal self-attention."""
    T = torch.tensor
    cases = []

    def attend(name, Q, K, V, scaled=True, note="", causal=False):
        s = Q @ K.t() / (math.sqrt(K.shape[1]) if scaled else 1.0)
        if causal:
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
        w = torch.softmax(s, 1)
        case = {"name": name, "note": note, "Q": listed(Q), "K": listed(K), "V": listed(V), "scaled": scaled}
        if not causal:
            case["scores"] = listed(s)
        case.update(weights=listed(w), output=listed(w @ V))
        cases.append(case)
        return w @ V

    X = T([[-2.0, 1.0, 0.5], [1.0, 1.5, -0.5], [-1.5, 1.0, -0.5], [-2.0, -2.5, 1.5]])
    attend("query_over_X", T([[-2.0, 1.0, -1.0]]), X, X, note="one query over the rows of X, scaled dot product; keys = values = X")
    WQ, WK, WV = T([[1, -1.5], [0, 2], [-0.5, -1]]), T([[-1.5, -1], [2.5, 0], [0.5, -1]]), T([[1, 2.5], [-0.5, -2], [0, -1]])
    Z1 = attend("self_attention_head1", X @ WQ, X @ WK, X @ WV, note="Q = X WQ, K = X WK, V = X WV, scaled by sqrt(2)")
    ones = torch.ones(3, 2)
    Z2 = attend("self_attention_head2", X @ ones, X @ ones, X @ ones, note="second head with all-ones projections")
    WO = T([[-1, 1.5, 2], [0, -1, -2], [1, -1.5, 0], [2, 0, 1]])
    cases.append({"name": "two_heads_output", "note": "[Z1, Z2] WO", "Z1": listed(Z1), "Z2": listed(Z2), "WO": listed(WO),
                  "output": listed(torch.cat([Z1, Z2], 1) @ WO)})
    H = T([[1.0, 2, 3], [1, 2, 1], [0, 1, -1]])
    attend("dot_attention_context", T([[1.0, 2, 1]]), H, H, scaled=False, note="unscaled dot product; alignment source s = (1,2,1)")
    attend("scaled_dot_by_hand", T([[1.0, 2], [3, 1]]), T([[2.0, 1], [1, 1], [0, 1]]), T([[1.0, 2, -2], [1, 1, 2], [0, 1, -1]]))
    Hs = T([[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.5], [0.3, 0.4, 0.5, 0.6]])
    st = T([[0.4, 0.5, 0.6, 0.7]])
    attend("seq2seq_dot", st, Hs, Hs, scaled=False, note="decoder state over encoder states")
    W = T([[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.5], [0.3, 0.4, 0.5, 0.6], [0.4, 0.5, 0.6, 0.7]])
    attend("seq2seq_multiplicative", st, Hs @ W.t(), Hs, scaled=False, note="general (bilinear) attention: e_i = s^T W h_i")
    Xq = T([[1, 0.3, 0.4], [1.5, 0.5, 1], [0.3, 1, 0.8]])
    Wq, Wk = T([[0, 0.7, 1], [1, 2, 0.3], [0.5, 1, 1]]), T([[1.8, 1, 1], [1, 0.5, 0.7], [0.2, 1.5, 0.9]])
    Wv = T([[1, 1.3, 0.4], [2, 1, 2], [1, 1.5, 0.2]])
    attend("self_attention_3x3", Xq @ Wq, Xq @ Wk, Xq @ Wv, note="scaled by sqrt(3)")
    attend("causal_self_attention_3x3", Xq @ Wq, Xq @ Wk, Xq @ Wv, note="mask: -inf above the diagonal", causal=True)
    return cases


# the homework model: BiGRU encoder, GRU decoder, logits from [a ; h]
HOMEWORK = dict(cell="gru", bidirectional=True, src_vocab=11, trg_vocab=13, emb=4, enc_hid=5, dec_hid=6, kq=7,
                combine="concat", src_len=[5, 3, 4], trg_len=[6, 4, 7])
# the practical's model: LSTM encoder and decoder, logits from tanh(W_c [a ; h])
PRACTICAL = dict(cell="lstm", bidirectional=False, src_vocab=8, trg_vocab=8, emb=3, enc_hid=6, dec_hid=6, kq=6,
                 combine="luong", src_len=[6, 2, 5, 4], trg_len=[8, 4, 7, 6])
MODELS = [("bigru_dummy", dict(HOMEWORK, attention="dummy"), 11),
          ("bigru_meanpool", dict(HOMEWORK, attention="meanpool"), 12),
          ("bigru_scaled_dot", dict(HOMEWORK, attention="scaled_dot"), 13),
          ("bigru_dot", dict(HOMEWORK, attention="dot", dec_hid=10), 14),  # dot: decoder width = encoder output's
          ("lstm_dummy", dict(PRACTICAL, attention="dummy"), 15),
          ("lstm_dot", dict(PRACTICAL, attention="dot"), 16)]


def write(out, name, obj):
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(obj, f, indent=1)
    print("wrote", name + ".json")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    for name, c, seed in MODELS:
        write(out, name, model_case(name, c, seed))
    write(out, "gru_cell", cell_case("gru", 5))
    write(out, "lstm_cell", cell_case("lstm", 6))
    write(out, "exercises", exercises())


if __name__ == "__main__":
    main()
