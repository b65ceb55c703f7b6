#!/usr/bin/env python3
"""Golden cases for the attention variants beyond tests/golden (general, additive, multihead)
and for other sizes and combinations, computed with PyTorch in float64 by the same code as
tests/golden/make_base.py (imported from there), with its Attention extended.

Test data generator, not part of the product. Run: /usr/bin/python3 make_extra.py
(needs Debian's python3-torch)."""
import json
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import make_base as mg  # noqa: E402

Base = mg.Attention


class Attention(Base):
    def __init__(self, kind, dec_hid, enc_dim, kq):
        super().__init__(kind if kind in ("dummy", "meanpool", "dot", "scaled_dot") else "dot", dec_hid, enc_dim, kq)
        self.kind = kind
        if kind == "general":  # h^T W enc_t
            self.W = nn.Linear(enc_dim, dec_hid, bias=False)
        if kind == "additive":  # v^T tanh(W_q h + W_k enc_t)
            self.W_q = nn.Linear(dec_hid, kq, bias=False)
            self.W_k = nn.Linear(enc_dim, kq)
            self.v = nn.Parameter(torch.empty(kq))

    def forward(self, h, enc, mask):
        if self.kind not in ("general", "additive"):
            return super().forward(h, enc, mask)
        if self.kind == "general":
            scores = torch.bmm(self.W(enc).transpose(0, 1), h.unsqueeze(2)).squeeze(2)
        else:
            pre = torch.tanh(self.W_q(h).unsqueeze(0) + self.W_k(enc))  # [S, B, A]
            scores = (pre @ self.v).t()  # [B, S]
        scores = scores.masked_fill(~mask.t(), float("-inf"))
        alpha = torch.softmax(scores, dim=1)
        a = torch.bmm(alpha.unsqueeze(1), enc.transpose(0, 1)).squeeze(1)
        return a, alpha


mg.Attention = Attention


class MultiheadAttention(nn.MultiheadAttention):
    """model.attention = "multihead": nn.MultiheadAttention(dec_hid, heads, kdim=vdim=enc_dim)
    with the decoder state as the one query; its parameters sit under decoder.attention."""

    def __init__(self, dec_hid, enc_dim, heads):
        super().__init__(dec_hid, heads, kdim=enc_dim, vdim=enc_dim)

    def forward(self, h, enc, mask):
        out, alpha = super().forward(h.unsqueeze(0), enc, enc, key_padding_mask=~mask.t(), need_weights=True,
                                     average_attn_weights=True)
        return out.squeeze(0), alpha.squeeze(1)  # [B, Hd], [B, S]


class Decoder(mg.Decoder):
    """The context of multihead attention is dec_hid wide: the output layer follows it."""

    def __init__(self, vocab, emb, hid, enc_dim, cell, attention, kq, combine, heads=None):
        super().__init__(vocab, emb, hid, enc_dim, cell, attention if attention != "multihead" else "dot", kq, combine)
        if attention == "multihead":
            self.attention = MultiheadAttention(hid, enc_dim, heads)
            if combine == "concat":
                self.out = nn.Linear(hid + hid, vocab)
            else:
                self.W_c = nn.Linear(hid + hid, hid, bias=False)


class Seq2Seq(mg.Seq2Seq):
    def __init__(self, c):
        super().__init__(c)
        if c["attention"] == "multihead":
            enc_dim = c["enc_hid"] * (2 if c["bidirectional"] else 1)
            self.decoder = Decoder(c["trg_vocab"], c["emb"], c["dec_hid"], enc_dim, c["cell"], c["attention"], c["kq"],
                                   c["combine"], c["heads"])


mg.Seq2Seq = Seq2Seq

CASES = {
    "bigru_general": dict(mg.HOMEWORK, attention="general"),
    "bigru_additive": dict(mg.HOMEWORK, attention="additive"),
    "lstm_general": dict(mg.PRACTICAL, attention="general", dec_hid=6),
    "lstm_additive": dict(mg.PRACTICAL, attention="additive", kq=4),
    "gru_uni_luong_scaled_dot": dict(cell="gru", bidirectional=False, src_vocab=9, trg_vocab=10, emb=5, enc_hid=7,
                                     dec_hid=7, kq=3, combine="luong", src_len=[4, 7, 2, 5, 1],
                                     trg_len=[3, 9, 5, 2, 6], attention="scaled_dot"),
    "lstm_bi_concat_meanpool": dict(cell="lstm", bidirectional=True, src_vocab=12, trg_vocab=6, emb=2, enc_hid=4,
                                    dec_hid=3, kq=5, combine="concat", src_len=[3, 6], trg_len=[5, 4],
                                    attention="meanpool"),
    "lstm_bi_luong_dot": dict(cell="lstm", bidirectional=True, src_vocab=7, trg_vocab=9, emb=6, enc_hid=3, dec_hid=6,
                              kq=2, combine="luong", src_len=[1, 5, 3], trg_len=[4, 2, 7], attention="dot"),
    "bigru_multihead": dict(mg.HOMEWORK, attention="multihead", heads=2, dec_hid=6),
    "gru_uni_luong_multihead": dict(cell="gru", bidirectional=False, src_vocab=9, trg_vocab=10, emb=5, enc_hid=8,
                                    dec_hid=8, kq=3, heads=4, combine="luong", src_len=[4, 7, 2, 5, 1],
                                    trg_len=[3, 9, 5, 2, 6], attention="multihead"),
}

if __name__ == "__main__":
    seed = 101
    for name, c in CASES.items():
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(mg.model_case(name, c, seed), f)
        print("wrote", name + ".json")
        seed += 1
