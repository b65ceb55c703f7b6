/* fuzz_state.c — libFuzzer entry for fuzz_state (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_state(data, size); }
