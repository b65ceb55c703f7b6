/* data_internal.h — what the data module's files share and nobody else calls. */
#ifndef S2S_DATA_INTERNAL_H
#define S2S_DATA_INTERNAL_H

#include "s2s/data.h"

/* ids of a line's tokens (unknown → <unk>), or of its subword pieces (with BPE-dropout when
 * dropout > 0, rng drawn from), with <sos>/<eos> when marked, into *ids (grown; *cap its size);
 * returns their count. Reads v only: safe on several threads at once. */
int data_encode_line(const Vocab *v, const char *line, bool marked, float dropout, Rng *rng, int32_t **ids, int *cap);
/* Whitespace-separated tokens in line. */
int data_count_tokens(const char *line);
/* Pair i's text kept in td->train_src_text / train_trg_text (BPE-dropout segments it anew each
 * epoch), the arrays grown as needed (*cap their size). */
void data_keep_text(TaskData *td, int i, int *cap, const char *src, const char *trg);


#endif
