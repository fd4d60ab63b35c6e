// Fuzzes ember's ops: each input is a short program of calls (tests/fuzz/op_programs.h) over
// small tensors of varied shapes, layouts, dtypes and scalars, each call checked against a
// float64 reference. ember::Error is a right answer; a different answer throws a Finding, which
// escapes to libFuzzer as an uncaught exception, as crashes and sanitizer reports do.
#include "op_programs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::fuzzing::run_op_program(data, size);
  return 0;
}
