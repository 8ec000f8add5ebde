// Halide's CUDA runtime uses torch's current context and the stream passed as user_context.
#include <dlfcn.h>
#include "HalideRuntimeCuda.h"
typedef int (*ctx_get_t)(void **);
static ctx_get_t ctx_get() {
  static ctx_get_t fn = nullptr;
  if (!fn) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    fn = lib ? (ctx_get_t)dlsym(lib, "cuCtxGetCurrent") : nullptr;
  }
  return fn;
}
static int acquire(void *, void **ctx, bool) {
  ctx_get_t fn = ctx_get();
  return fn ? fn(ctx) : -1;
}
static int release(void *) { return 0; }
static int get_stream(void *user_context, void *, void **stream) {
  *stream = user_context;
  return 0;
}
static int install() {
  halide_set_cuda_acquire_context(&acquire);
  halide_set_cuda_release_context(&release);
  halide_set_cuda_get_stream(&get_stream);
  return 0;
}
static int installed = install();
