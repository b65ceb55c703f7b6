/* fuzz_prepared.c — libFuzzer entry for fuzz_prepared (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_prepared(data, size); }
