/* fuzz_bpe.c — libFuzzer entry for fuzz_bpe (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_bpe(data, size); }
