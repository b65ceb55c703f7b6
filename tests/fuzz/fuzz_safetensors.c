/* fuzz_safetensors.c — libFuzzer entry for fuzz_safetensors (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_safetensors(data, size); }
