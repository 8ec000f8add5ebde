// Halide's error handler for the process: each error is counted per thread, then passed on (to Python's logger).
// A kernel built without Halide's asserts does not check what its device calls return (a failed launch left the
// outputs unwritten and the call returned 0: wrong numbers, silently); its glue compares the count around the call.
#include <cstdint>

#include "HalideRuntime.h"

namespace {
thread_local uint64_t count = 0;
void (*forward)(void *, const char *) = nullptr;

void handler(void *user_context, const char *msg) {
  count++;
  if (forward) forward(user_context, msg);
}
}  // namespace

extern "C" uint64_t hx_error_count() { return count; }

extern "C" void hx_set_error_handler(void (*f)(void *, const char *)) {
  forward = f;
  halide_set_error_handler(handler);
}
