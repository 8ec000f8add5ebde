// Halide's CUDA runtime uses torch's current context and the stream passed as user_context; kernels built with
// direct launch (compiler.py renames their module and launch calls to hx_cuda_direct_*) skip its per-call work.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include "HalideRuntimeCuda.h"

typedef int (*ctx_get_t)(void **);
static void *libcuda() {
  static void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  return lib;
}
static ctx_get_t ctx_get() {
  static ctx_get_t fn = libcuda() ? (ctx_get_t)dlsym(libcuda(), "cuCtxGetCurrent") : nullptr;
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

// Direct launch. Per pipeline call Halide's runtime pushes and pops the context three times (initialize, run,
// finalize), looks its module up under a mutex twice, and per launch calls cuModuleGetFunction and mallocs two
// argument arrays. Here the pipeline's own state word (the void* Halide keeps per pipeline for its module cache)
// holds a list of modules, one per CUDA context, each with the functions looked up so far: after the first call a
// launch is cuCtxGetCurrent, two short scans and cuLaunchKernel. The module is loaded as Halide loads it
// (cuModuleLoadData, driver-default JIT options); nothing else of Halide's CUDA runtime changes.
namespace {
typedef int (*module_load_t)(void **, const void *);
typedef int (*get_function_t)(void **, void *, const char *);
typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
typedef int (*error_name_t)(int, const char **);

struct Driver {
  module_load_t module_load = nullptr;
  get_function_t get_function = nullptr;
  launch_t launch = nullptr;
  error_name_t error_name = nullptr;
  Driver() {
    if (void *lib = libcuda()) {
      module_load = (module_load_t)dlsym(lib, "cuModuleLoadData");
      get_function = (get_function_t)dlsym(lib, "cuModuleGetFunction");
      launch = (launch_t)dlsym(lib, "cuLaunchKernel");
      error_name = (error_name_t)dlsym(lib, "cuGetErrorName");
    }
  }
};
const Driver &driver() {
  static const Driver d;
  return d;
}

constexpr int kMaxFunctions = 16;
struct Function {
  const char *entry;
  void *fn;
};
struct Module {
  void *context;
  void *module;
  Module *next;
  int count;  // functions published (release store after the entry is written)
  Function functions[kMaxFunctions];
};
std::mutex slow_path;  // module loads and function lookups: once per pipeline, context and kernel

int fail(void *uc, const char *what, int err) {
  const char *name = nullptr;
  if (driver().error_name) driver().error_name(err, &name);
  char text[256];
  snprintf(text, sizeof text, "CUDA: %s failed: %s (%d)", what, name ? name : "unknown error", err);
  halide_error(uc, text);
  return halide_error_code_device_run_failed;
}

int current_context(void *uc, void **ctx) {
  *ctx = nullptr;
  ctx_get_t get = ctx_get();
  if (!get || !driver().module_load || !driver().get_function || !driver().launch) {
    halide_error(uc, "CUDA: libcuda.so.1 or one of its functions is missing");
    return halide_error_code_device_run_failed;
  }
  if (int err = get(ctx)) return fail(uc, "cuCtxGetCurrent", err);
  if (!*ctx) {
    halide_error(uc, "CUDA: no current context (torch has not initialised CUDA on this thread)");
    return halide_error_code_device_run_failed;
  }
  return 0;
}

Module *find(Module *head, void *ctx) {
  for (Module *m = head; m; m = m->next)
    if (m->context == ctx) return m;
  return nullptr;
}

void *function_of(void *uc, Module *m, const char *entry, int *err) {
  int n = __atomic_load_n(&m->count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (m->functions[i].entry == entry) return m->functions[i].fn;
  std::lock_guard<std::mutex> hold(slow_path);
  n = m->count;
  for (int i = 0; i < n; i++)
    if (m->functions[i].entry == entry) return m->functions[i].fn;
  void *fn = nullptr;
  if (int e = driver().get_function(&fn, m->module, entry)) {
    *err = fail(uc, "cuModuleGetFunction", e);
    return nullptr;
  }
  if (n < kMaxFunctions) {  // more kernels than that in one pipeline: looked up per launch, still correct
    m->functions[n] = {entry, fn};
    __atomic_store_n(&m->count, n + 1, __ATOMIC_RELEASE);
  }
  return fn;
}
}  // namespace

extern "C" int hx_cuda_direct_initialize(void *uc, void **state, const char *ptx, int) {
  void *ctx;
  if (int err = current_context(uc, &ctx)) return err;
  if (find(__atomic_load_n(reinterpret_cast<Module **>(state), __ATOMIC_ACQUIRE), ctx)) return 0;
  std::lock_guard<std::mutex> hold(slow_path);
  Module *head = *reinterpret_cast<Module **>(state);
  if (find(head, ctx)) return 0;
  void *module = nullptr;
  if (int err = driver().module_load(&module, ptx)) return fail(uc, "cuModuleLoadData", err);
  Module *m = new Module{ctx, module, head, 0, {}};  // kept for the process, as Halide keeps its modules
  __atomic_store_n(reinterpret_cast<Module **>(state), m, __ATOMIC_RELEASE);
  return 0;
}

extern "C" void hx_cuda_direct_finalize(void *, void *) {}

extern "C" int hx_cuda_direct_run(void *uc, void *state, const char *entry, int bx, int by, int bz, int tx, int ty,
                                  int tz, int shared, size_t *sizes, void **args, int8_t *is_buffer) {
  void *ctx;
  if (int err = current_context(uc, &ctx)) return err;
  Module *m = find(reinterpret_cast<Module *>(state), ctx);
  if (!m) {
    halide_error(uc, "CUDA: kernel launched before its module was loaded for the current context");
    return halide_error_code_device_run_failed;
  }
  int err = 0;
  void *fn = function_of(uc, m, entry, &err);
  if (!fn) return err;
  constexpr int kArgs = 256;
  void *translated[kArgs];
  uint64_t handles[kArgs];
  int n = 0;
  while (sizes[n] != 0) n++;
  if (n > kArgs) {
    halide_error(uc, "CUDA: more than 256 kernel arguments");
    return halide_error_code_device_run_failed;
  }
  for (int i = 0; i < n; i++) {
    if (is_buffer[i]) {
      handles[i] = reinterpret_cast<halide_buffer_t *>(args[i])->device;
      translated[i] = &handles[i];
    } else {
      translated[i] = args[i];
    }
  }
  // the stream is the user context (get_stream above): torch's current stream, passed by the glue
  if (int e = driver().launch(fn, bx, by, bz, tx, ty, tz, shared, uc, translated, nullptr))
    return fail(uc, "cuLaunchKernel", e);
  return 0;
}
