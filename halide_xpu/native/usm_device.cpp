// Halide device API over SYCL USM: buffers are USM pointers, kernels go to the sycl::queue given as
// user_context. Built into the shared Halide runtime; kernel objects compiled for Halide's OpenCL target
// have their halide_opencl_{initialize_kernels,run,finalize_kernels,device_interface} references renamed
// to the hx_usm_* functions (see halide_xpu/usm.py for the design and why). This file: shared state, queue
// records, setup and introspection. Memory: usm_memory.cpp; programs: usm_programs.cpp; launch: usm_launch.cpp.
//
// dpctl's C interface (libDPCTLSyclInterface) is resolved with dlopen at hx_usm_init, so the runtime
// builds without SYCL headers and loads on machines without dpctl.
#include <dlfcn.h>

#include <cstdio>
#include <unordered_set>

#include "usm_state.h"

// Bytes of the `__local int16*` shared-memory argument of Halide's OpenCL kernels for ``bytes`` of allocations:
// whole int16s, plus room for the padding Halide 21 leaves out of the total (compiler.LOCAL_SLACK, same value).
extern "C" int hx_local_bytes(int bytes) { return bytes > 0 ? (bytes + 63) / 64 * 64 + 256 : 64; }

namespace hx_usm {

Api api;
bool api_ready = false;
void *dpctl_handle = nullptr;  // hx_usm_init's dlopen of dpctl's C library
std::mutex lock;
std::string init_error = "hx_usm_init was not called";
std::atomic<uint64_t> n_launches{0}, n_to_host{0}, n_to_device{0}, n_mallocs{0}, n_frees{0}, n_builds{0};
std::atomic<uint64_t> n_binary_loads{0}, n_binary_rejects{0}, n_native_loads{0}, n_native_rejects{0};
std::map<std::string, Binary> spirv_modules, native_binaries;
NativeLoader native_loader = nullptr;
int sub_group_size = 0;
size_t pool_limit = size_t(256) << 20;
std::unordered_map<Ref, QueueInfo> queues;
std::vector<QueueInfo> retired;
std::unordered_map<void *, Allocation> allocations;

void report(void *uc, const std::string &msg) { halide_error(uc, ("halide_xpu usm: " + msg).c_str()); }

// The queue's cached facts; nullptr (with an error reported) when user_context is not a usable queue.
QueueInfo *queue_info(void *uc) {
  if (!api_ready) {
    report(uc, init_error);
    return nullptr;
  }
  if (!uc) {
    report(uc, "no SYCL queue: kernels of the sycl target need a sycl::queue* as user_context");
    return nullptr;
  }
  size_t h = api.queue_hash(uc);
  auto it = queues.find(uc);
  if (it != queues.end() && it->second.hash == h) return &it->second;
  if (it != queues.end()) {  // a new queue at the address of a destroyed one: retire the old record
    retired.push_back(std::move(it->second));
    queues.erase(it);
  }
  QueueInfo q;
  q.hash = h;
  q.in_order = api.queue_is_in_order(uc);
  if (!q.in_order) {
    report(uc, "the SYCL queue is out-of-order; Halide pipelines need an in-order queue (torch's XPU queues are)");
    return nullptr;
  }
  q.owned = api.queue_copy(uc);
  q.context = api.queue_get_context(uc);
  q.device = api.queue_get_device(uc);
  q.context_key = api.context_hash(q.context);
  q.device_key = api.device_hash(q.device);
  q.max_wg = api.device_max_wg(q.device);
  return &(queues[uc] = q);
}

void release_pool(QueueInfo &q) {
  if (q.pool.empty()) return;
  api.queue_wait(q.owned);  // pooled memory may still be used by queued kernels
  for (auto &kv : q.pool) {
    allocations.erase(kv.second);
    api.free_with_queue(kv.second, q.owned);
    n_frees++;
  }
  q.pool.clear();
  q.pooled = 0;
}

int release_all(void *) {
  std::lock_guard<std::mutex> g(lock);
  for (auto &kv : queues) release_pool(kv.second);
  for (auto &q : retired) release_pool(q);
  return 0;
}

}  // namespace hx_usm

using namespace hx_usm;

extern "C" {

int hx_usm_init(const char *dpctl_library) {
  std::lock_guard<std::mutex> g(lock);
  if (api_ready) return 0;
  void *lib = dlopen(dpctl_library, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    init_error = std::string("cannot load dpctl's ") + dpctl_library + ": " + dlerror();
    return -1;
  }
  struct {
    const char *name;
    void **slot;
  } table[] = {
      {"DPCTLQueue_Copy", (void **)&api.queue_copy},
      {"DPCTLQueue_GetContext", (void **)&api.queue_get_context},
      {"DPCTLQueue_GetDevice", (void **)&api.queue_get_device},
      {"DPCTLQueue_IsInOrder", (void **)&api.queue_is_in_order},
      {"DPCTLQueue_Hash", (void **)&api.queue_hash},
      {"DPCTLQueue_GetBackend", (void **)&api.queue_backend},
      {"DPCTLQueue_Wait", (void **)&api.queue_wait},
      {"DPCTLQueue_Memcpy", (void **)&api.queue_memcpy},
      {"DPCTLQueue_SubmitNDRange", (void **)&api.submit},
      {"DPCTLKernelBundle_CreateFromOCLSource", (void **)&api.bundle_from_source},
      {"DPCTLKernelBundle_CreateFromSpirv", (void **)&api.bundle_from_spirv},
      {"DPCTLKernelBundle_GetKernel", (void **)&api.bundle_get_kernel},
      {"DPCTLUSM_GetPointerType", (void **)&api.pointer_type},
      {"DPCTLmalloc_device", (void **)&api.malloc_device},
      {"DPCTLmalloc_shared", (void **)&api.malloc_shared},
      {"DPCTLfree_with_queue", (void **)&api.free_with_queue},
      {"DPCTLEvent_Delete", (void **)&api.event_delete},
      {"DPCTLContext_Delete", (void **)&api.context_delete},
      {"DPCTLDevice_Delete", (void **)&api.device_delete},
      {"DPCTLContext_Hash", (void **)&api.context_hash},
      {"DPCTLDevice_Hash", (void **)&api.device_hash},
      {"DPCTLDevice_GetMaxWorkGroupSize", (void **)&api.device_max_wg},
      {"DPCTLKernel_GetWorkGroupSize", (void **)&api.kernel_max_wg},
      {"DPCTLKernel_GetNumArgs", (void **)&api.kernel_num_args},
  };
  for (auto &entry : table) {
    *entry.slot = dlsym(lib, entry.name);
    if (!*entry.slot) {
      init_error = std::string("dpctl library ") + dpctl_library + " lacks " + entry.name + " (dpctl >= 0.18 needed)";
      return -1;
    }
  }
  api_ready = true;
  dpctl_handle = lib;
  return 0;
}

const char *hx_usm_init_error() { return init_error.c_str(); }

void hx_usm_configure(int sub_group, uint64_t pool_limit_bytes) {
  sub_group_size = sub_group;
  pool_limit = pool_limit_bytes;
}

// launches, copies to host, copies to device, USM allocations, USM frees, programs made (from any format),
// SPIR-V modules loaded, SPIR-V modules the device refused, native binaries loaded, native binaries refused
void hx_usm_counters(uint64_t out[10]) {
  const std::atomic<uint64_t> *all[] = {&n_launches, &n_to_host, &n_to_device, &n_mallocs, &n_frees, &n_builds,
                                        &n_binary_loads, &n_binary_rejects, &n_native_loads, &n_native_rejects};
  for (int i = 0; i < 10; i++) out[i] = *all[i];
}

// Queues whose host (non-USM) tensor pointers the glue stages through USM copies instead of refusing them (an
// AOTInductor package's queue on the CPU emulation: its tensors come from torch's plain CPU allocator).
static std::unordered_set<void *> staging_queues;

void hx_usm_stage_host(void *queue) {
  std::lock_guard<std::mutex> g(lock);
  staging_queues.insert(queue);
}

// An in-order queue on the first SYCL device matching a dpctl filter ("opencl:cpu:0"), kept for the process;
// nullptr (with the reason in hx_usm_init_error) when there is none. For code without dpctl's Python.
void *hx_usm_make_queue(const char *filter) {
  std::lock_guard<std::mutex> g(lock);
  if (!api_ready || !dpctl_handle) return nullptr;
  typedef Ref (*selector_t)(const char *);
  typedef Ref (*device_t)(Ref);
  typedef Ref (*queue_t)(Ref, void *, int);
  typedef void (*delete_t)(Ref);
  auto make_selector = (selector_t)dlsym(dpctl_handle, "DPCTLFilterSelector_Create");
  auto make_device = (device_t)dlsym(dpctl_handle, "DPCTLDevice_CreateFromSelector");
  auto make_queue = (queue_t)dlsym(dpctl_handle, "DPCTLQueue_CreateForDevice");
  auto delete_selector = (delete_t)dlsym(dpctl_handle, "DPCTLDeviceSelector_Delete");
  if (!make_selector || !make_device || !make_queue || !delete_selector) {
    init_error = "dpctl lacks DPCTLFilterSelector_Create/DPCTLDevice_CreateFromSelector/DPCTLQueue_CreateForDevice";
    return nullptr;
  }
  Ref selector = make_selector(filter);
  Ref device = selector ? make_device(selector) : nullptr;
  if (selector) delete_selector(selector);
  Ref queue = device ? make_queue(device, nullptr, 1 << 1 /* DPCTL_IN_ORDER */) : nullptr;
  if (device) api.device_delete(device);
  if (!queue) init_error = std::string("no SYCL device matches the filter ") + filter;
  return queue;
}

// 0 when `ptr` is USM memory of the queue's context; 1 when it is host memory the glue stages (host staging on);
// else an error, reporting which argument is wrong.
int hx_usm_check_pointer(void *queue, const void *ptr, const char *arg) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(queue);
  if (!q) return halide_error_code_device_interface_no_device;
  if (api.pointer_type(ptr, q->context) == kUsmUnknown) {
    if (staging_queues.count(queue)) return 1;
    char where[32];
    std::snprintf(where, sizeof where, "%p", ptr);
    report(queue, std::string("argument ") + arg + " (" + where +
                      ") is not USM memory of the queue's SYCL context; on the sycl emulation target allocate "
                      "tensors under halide_xpu.usm.usm_tensors(), on xpu pass tensors of the queue's device");
    return halide_error_code_device_interface_no_device;
  }
  return 0;
}

void hx_usm_wait(void *queue) {
  if (api_ready && queue) api.queue_wait(queue);
}

void hx_usm_release_all() { release_all(nullptr); }

}  // extern "C"
