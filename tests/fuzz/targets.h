/* targets.h — the fuzzed entry points: the config parser, the model-file loader, the text
 * path (line reader, UTF-8 check, tokenizer, encoding, BLEU), the training state of last.bin
 * the attention calculator's input, safetensors files, ./serve's translate requests and prepared data files. Each takes any bytes and must neither
 * crash nor leak; libFuzzer drives them (make fuzz), and their corpora replay in make test. */
#ifndef S2S_FUZZ_TARGETS_H
#define S2S_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

int fuzz_config(const uint8_t *data, size_t size);
int fuzz_model(const uint8_t *data, size_t size);
int fuzz_text(const uint8_t *data, size_t size);
int fuzz_state(const uint8_t *data, size_t size);
int fuzz_attend(const uint8_t *data, size_t size);
int fuzz_bpe(const uint8_t *data, size_t size);
int fuzz_safetensors(const uint8_t *data, size_t size);
int fuzz_serve(const uint8_t *data, size_t size);
int fuzz_prepared(const uint8_t *data, size_t size);

#endif
