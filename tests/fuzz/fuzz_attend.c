/* fuzz_attend.c — libFuzzer entry for fuzz_attend (make fuzz). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_attend(data, size); }
