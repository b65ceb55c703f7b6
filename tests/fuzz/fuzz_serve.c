/* fuzz_serve.c — libFuzzer entry for fuzz_serve (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_serve(data, size); }
