/* visuals.h — the pictures of a model: attention heatmaps of decoded sentences and the
 * learning curves of a run. Glue between the model's ids and viz's images; borrows
 * everything it is given. */
#ifndef S2S_VISUALS_H
#define S2S_VISUALS_H

#include "s2s/data.h"
#include "s2s/viz.h"

/* One decoded sentence: attn holds a row of S weights per output step (stride S), for the
 * nout outputs and, when ended, the step that produced <eos>. */
typedef struct DecodedAttention {
    const int32_t *src;   /* (ns) source ids */
    int ns;
    const int32_t *out;   /* (nout) output ids */
    int nout;
    bool ended;
    const float *attn;    /* (nout + ended, stride) */
    int stride;
} DecodedAttention;

S2sStatus visuals_heatmap(const char *path, const char *title, const Vocab *src, const Vocab *trg,
                          const DecodedAttention *a, Font *font, S2sError *err);
/* Multi-head attention: the heads' mean (a->attn) and each head's weights in one picture, a
 * panel each. heads_attn holds, per output step, `heads` rows of a->stride weights. */
S2sStatus visuals_heatmap_heads(const char *path, const char *title, const Vocab *src, const Vocab *trg,
                                const DecodedAttention *a, int heads, const float *heads_attn, Font *font, S2sError *err);

/* A Transformer's layers for one sentence, a panel each: cross[0..dec_layers) (rows × ns: each
 * decoder layer's cross-attention, the heads' mean; rows = nout + ended as in a) into path_cross,
 * and self[0..enc_layers) (ns × ns: each encoder layer's self-attention, the heads' mean) into
 * path_self. */
S2sStatus visuals_layers(const char *path_cross, const char *path_self, const char *title, const Vocab *src,
                         const Vocab *trg, const DecodedAttention *a, int dec_layers, int enc_layers,
                         const float *const *cross, const float *const *self, Font *font, S2sError *err);

/* dir/curves.png from the epoch lines of dir/log.jsonl: train and validation loss above, the
 * validation metric (exact match or BLEU) below. */
S2sStatus visuals_curves(const char *dir, const char *title, Font *font, S2sError *err);

#endif
