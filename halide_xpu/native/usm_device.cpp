// Halide device API over SYCL USM: buffers are USM pointers, kernels go to the sycl::queue given as
// user_context. Built into the shared Halide runtime; kernel objects compiled for Halide's OpenCL target
// have their halide_opencl_{initialize_kernels,run,finalize_kernels,device_interface} references renamed
// to the hx_usm_* functions below (see halide_xpu/usm.py for the design and why).
//
// dpctl's C interface (libDPCTLSyclInterface) is resolved with dlopen at hx_usm_init, so the runtime
// builds without SYCL headers and loads on machines without dpctl.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "HalideRuntime.h"

extern "C" {
// Layout of Halide's per-API table (src/runtime/device_interface.h); HalideRuntime.h only declares it.
struct halide_device_interface_impl_t {
  void (*use_module)();
  void (*release_module)();
  int (*device_malloc)(void *, halide_buffer_t *);
  int (*device_free)(void *, halide_buffer_t *);
  int (*device_sync)(void *, halide_buffer_t *);
  int (*device_release)(void *);
  int (*copy_to_host)(void *, halide_buffer_t *);
  int (*copy_to_device)(void *, halide_buffer_t *);
  int (*device_and_host_malloc)(void *, halide_buffer_t *);
  int (*device_and_host_free)(void *, halide_buffer_t *);
  int (*buffer_copy)(void *, halide_buffer_t *, const halide_device_interface_t *, halide_buffer_t *);
  int (*device_crop)(void *, const halide_buffer_t *, halide_buffer_t *);
  int (*device_slice)(void *, const halide_buffer_t *, int, int, halide_buffer_t *);
  int (*device_release_crop)(void *, halide_buffer_t *);
  int (*wrap_native)(void *, halide_buffer_t *, uint64_t);
  int (*detach_native)(void *, halide_buffer_t *);
};
int halide_device_and_host_malloc(void *, halide_buffer_t *, const halide_device_interface_t *);
int halide_device_and_host_free(void *, halide_buffer_t *);
}


// Bytes of the `__local int16*` shared-memory argument of Halide's OpenCL kernels for ``bytes`` of allocations:
// whole int16s, plus room for the padding Halide 21 leaves out of the total (compiler.LOCAL_SLACK, same value).
extern "C" int hx_local_bytes(int bytes) { return bytes > 0 ? (bytes + 63) / 64 * 64 + 256 : 64; }

namespace {

typedef void *Ref;  // dpctl's opaque refs (sycl::queue*, sycl::context*, ...)

// dpctl enums (dpctl_sycl_enum_types.h)
enum ArgType { kInt8 = 0, kInt16 = 2, kInt32 = 4, kInt64 = 6, kVoidPtr = 10, kLocalAccessor = 11 };
enum UsmType { kUsmUnknown = 0, kUsmDevice = 1, kUsmShared = 2, kUsmHost = 3 };
enum Backend { kLevelZero = 1 << 17, kOpenCL = 1 << 18 };

struct LocalAccessor {  // dpctl's MDLocalAccessor
  size_t ndim;
  int type;
  size_t dim0, dim1, dim2;
};

struct Api {
  Ref (*queue_copy)(Ref);
  Ref (*queue_get_context)(Ref);
  Ref (*queue_get_device)(Ref);
  bool (*queue_is_in_order)(Ref);
  size_t (*queue_hash)(Ref);
  int (*queue_backend)(Ref);
  void (*queue_wait)(Ref);
  Ref (*queue_memcpy)(Ref, void *, const void *, size_t);
  Ref (*submit)(Ref, Ref, void **, const int *, size_t, const size_t *, const size_t *, size_t, const Ref *, size_t);
  Ref (*bundle_from_source)(Ref, Ref, const char *, const char *);
  Ref (*bundle_from_spirv)(Ref, Ref, const void *, size_t, const char *);
  Ref (*bundle_get_kernel)(Ref, const char *);
  int (*pointer_type)(const void *, Ref);
  void *(*malloc_device)(size_t, Ref);
  void *(*malloc_shared)(size_t, Ref);
  void (*free_with_queue)(void *, Ref);
  void (*event_delete)(Ref);
  void (*context_delete)(Ref);
  void (*device_delete)(Ref);
  size_t (*context_hash)(Ref);
  size_t (*device_hash)(Ref);
  size_t (*device_max_wg)(Ref);
  size_t (*kernel_max_wg)(Ref);
  size_t (*kernel_num_args)(Ref);
};

Api api;
bool api_ready = false;
std::mutex lock;
std::string init_error = "hx_usm_init was not called";

std::atomic<uint64_t> n_launches{0}, n_to_host{0}, n_to_device{0}, n_mallocs{0}, n_frees{0}, n_builds{0};
std::atomic<uint64_t> n_binary_loads{0}, n_binary_rejects{0};
// SPIR-V modules built ahead of launch (halide_xpu/device_binary.py), keyed by the prepared OpenCL C they came from.
std::map<std::string, std::vector<uint8_t>> spirv_modules;
int sub_group_size = 0;  // intel_reqd_sub_group_size for every kernel; 0 leaves it to the compiler
size_t pool_limit = size_t(256) << 20;

struct QueueInfo {
  Ref owned = nullptr;  // our copy of the queue: waits and frees stay valid after the caller's queue is gone
  size_t hash = 0;
  Ref context = nullptr, device = nullptr;
  size_t context_key = 0, device_key = 0, max_wg = 0;
  bool in_order = false;
  std::multimap<size_t, void *> pool;  // freed intermediates, reused on this (in-order) queue only
  size_t pooled = 0;
};
std::unordered_map<Ref, QueueInfo> queues;
std::vector<QueueInfo> retired;  // records of destroyed queues whose pools are released at exit
struct Allocation {
  Ref queue;  // the caller's queue pointer (key of `queues`)
  size_t size;
  Ref owned;  // our copy of that queue, for waits and frees
};
std::unordered_map<void *, Allocation> allocations;  // USM memory this module allocated

struct Kernel {
  Ref ref;
  size_t num_args;  // Halide's arguments, plus one when the kernel still takes the shared-memory argument
  size_t max_wg;
};

struct Module {  // Halide's per-pipeline kernel state
  std::string source;
  std::map<std::pair<size_t, size_t>, Ref> bundles;  // (context, device) -> kernel bundle
  std::map<std::pair<Ref, const char *>, Kernel> kernels;  // entry names are constants of the kernel object
};

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

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) n++;
  return n;
}

std::string replace_all(const std::string &text, const std::string &from, const std::string &to) {
  std::string out;
  size_t pos = 0, hit;
  while ((hit = text.find(from, pos)) != std::string::npos) {
    out.append(text, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(text, pos, std::string::npos);
  return out;
}

// Halide's OpenCL source, adapted: every kernel gets the device's sub-group size, and the trailing dynamic
// shared-memory parameter is dropped where no kernel uses it (a local-memory argument costs ~5 us per
// submit on the CPU runtime). hx_usm_run passes that argument only to kernels that still declare it.
std::string prepare_source(const std::string &src, int sub_group) {
  const std::string unused_shared = ",\n __local int16* __shared)";
  std::string out = src;
  if (count(out, unused_shared) == count(out, "__shared")) out = replace_all(out, unused_shared, ")");
  if (sub_group) {
    out = replace_all(out, "__kernel void ",
                      "__kernel __attribute__((intel_reqd_sub_group_size(" + std::to_string(sub_group) + "))) void ");
  }
  return out;
}

Ref bundle_for(void *uc, Module *m, QueueInfo *q) {
  auto key = std::make_pair(q->context_key, q->device_key);
  auto it = m->bundles.find(key);
  if (it != m->bundles.end()) return it->second;
  int backend = api.queue_backend(uc);
  std::string src = prepare_source(m->source, sub_group_size);
  Ref kb = nullptr;
  auto spv = spirv_modules.find(src);
  if (spv != spirv_modules.end()) {  // SPIR-V built ahead of launch; if the device refuses it, build the source
    kb = api.bundle_from_spirv(q->context, q->device, spv->second.data(), spv->second.size(), "");
    if (kb) {
      n_binary_loads++;
    } else {
      n_binary_rejects++;
      std::fprintf(stderr, "halide_xpu usm: the SYCL device refused a SPIR-V module; building its OpenCL C source\n");
    }
  }
  if (!kb) kb = api.bundle_from_source(q->context, q->device, src.c_str(), "");
  if (!kb) {
    report(uc, std::string("building the OpenCL C program failed on this SYCL device") +
                   (backend == kLevelZero ? " (Level Zero queue: dpctl needs ocloc for OpenCL C sources)" : "") +
                   "; set HALIDE_XPU_DUMP_STMT=1 to keep the kernel source");
    return nullptr;
  }
  n_builds++;
  m->bundles[key] = kb;
  return kb;
}

int64_t span_bytes(const halide_buffer_t *b, int64_t *begin) {
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < b->dimensions; i++) {
    int64_t s = int64_t(b->dim[i].stride) * (b->dim[i].extent - 1);
    if (b->dim[i].extent <= 0) return 0;
    if (s < 0) lo += s; else hi += s;
  }
  *begin = lo * b->type.bytes();
  return (hi - lo + 1) * b->type.bytes();
}

// Copies the elements of `b` between its host and device allocations, one dense innermost run at a time.
int copy_runs(void *uc, halide_buffer_t *b, bool to_host) {
  int64_t begin;
  if (span_bytes(b, &begin) == 0) return 0;
  const int64_t esize = b->type.bytes();
  int64_t run = esize;
  int first = 0;
  if (b->dimensions > 0 && b->dim[0].stride == 1) {
    run = int64_t(b->dim[0].extent) * esize;
    first = 1;
  }
  std::vector<int> idx(b->dimensions, 0);
  uint8_t *dev = reinterpret_cast<uint8_t *>(b->device);
  while (true) {
    int64_t off = 0;
    for (int i = first; i < b->dimensions; i++) off += int64_t(idx[i]) * b->dim[i].stride * esize;
    Ref ev = to_host ? api.queue_memcpy(uc, b->host + off, dev + off, run) : api.queue_memcpy(uc, dev + off, b->host + off, run);
    if (!ev) {
      report(uc, "USM memcpy failed");
      return to_host ? halide_error_code_copy_to_host_failed : halide_error_code_copy_to_device_failed;
    }
    api.event_delete(ev);
    int d = first;
    for (; d < b->dimensions; d++) {
      if (++idx[d] < b->dim[d].extent) break;
      idx[d] = 0;
    }
    if (d >= b->dimensions) break;
  }
  api.queue_wait(uc);
  return 0;
}

// ------------------------------------------------------------------ device interface implementation
void use_module() {}
void release_module() {}

int usm_malloc(void *uc, halide_buffer_t *buf);
int usm_free(void *uc, halide_buffer_t *buf);

int usm_sync(void *uc, halide_buffer_t *) {
  std::lock_guard<std::mutex> g(lock);
  if (!queue_info(uc)) return halide_error_code_device_sync_failed;
  api.queue_wait(uc);
  return 0;
}

int usm_release(void *) {
  std::lock_guard<std::mutex> g(lock);
  for (auto &kv : queues) release_pool(kv.second);
  for (auto &q : retired) release_pool(q);
  return 0;
}

int usm_copy_to_host(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  if (!queue_info(uc)) return halide_error_code_copy_to_host_failed;
  n_to_host++;
  if (buf->host == reinterpret_cast<uint8_t *>(buf->device)) {  // shared allocation: only wait
    api.queue_wait(uc);
    return 0;
  }
  return copy_runs(uc, buf, true);
}

int usm_copy_to_device(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  if (!queue_info(uc)) return halide_error_code_copy_to_device_failed;
  n_to_device++;
  if (buf->host == reinterpret_cast<uint8_t *>(buf->device)) return 0;
  return copy_runs(uc, buf, false);
}

const halide_device_interface_t *iface();

int usm_and_host_malloc(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_device_malloc_failed;
  size_t size = buf->size_in_bytes();
  void *p = api.malloc_shared(size ? size : 1, uc);
  if (!p) {
    report(uc, "USM shared allocation of " + std::to_string(size) + " bytes failed");
    return halide_error_code_device_malloc_failed;
  }
  n_mallocs++;
  allocations[p] = Allocation{uc, size, q->owned};
  buf->host = static_cast<uint8_t *>(p);
  buf->device = reinterpret_cast<uint64_t>(p);
  buf->device_interface = iface();
  return 0;
}

int usm_and_host_free(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  void *p = reinterpret_cast<void *>(buf->device);
  auto it = allocations.find(p);
  if (it != allocations.end()) {
    api.queue_wait(it->second.owned);
    api.free_with_queue(p, it->second.owned);
    allocations.erase(it);
    n_frees++;
  }
  buf->host = nullptr;
  buf->device = 0;
  buf->device_interface = nullptr;
  return 0;
}

int usm_buffer_copy(void *uc, halide_buffer_t *, const halide_device_interface_t *, halide_buffer_t *) {
  report(uc, "device-to-device buffer copies are not supported by the USM runtime");
  return halide_error_code_device_buffer_copy_failed;
}

int64_t crop_offset(const halide_buffer_t *src, const halide_buffer_t *dst) {
  int64_t off = 0;
  for (int i = 0; i < src->dimensions; i++) off += int64_t(dst->dim[i].min - src->dim[i].min) * src->dim[i].stride;
  return off * src->type.bytes();
}

int usm_crop(void *, const halide_buffer_t *src, halide_buffer_t *dst) {
  dst->device = src->device + crop_offset(src, dst);
  dst->device_interface = src->device_interface;
  return 0;
}

int usm_slice(void *, const halide_buffer_t *src, int d, int pos, halide_buffer_t *dst) {
  dst->device = src->device + int64_t(pos - src->dim[d].min) * src->dim[d].stride * src->type.bytes();
  dst->device_interface = src->device_interface;
  return 0;
}

int usm_release_crop(void *, halide_buffer_t *) { return 0; }

int usm_wrap(void *uc, halide_buffer_t *buf, uint64_t handle) {
  if (buf->device) {
    report(uc, "wrap_native on a buffer that already has a device allocation");
    return halide_error_code_device_wrap_native_failed;
  }
  buf->device = handle;
  buf->device_interface = iface();
  return 0;
}

int usm_detach(void *, halide_buffer_t *buf) {
  buf->device = 0;
  buf->device_interface = nullptr;
  return 0;
}

const halide_device_interface_impl_t impl = {
    use_module,        release_module,      usm_malloc,          usm_free,   usm_sync, usm_release,
    usm_copy_to_host,  usm_copy_to_device,  usm_and_host_malloc, usm_and_host_free,    usm_buffer_copy,
    usm_crop,          usm_slice,           usm_release_crop,    usm_wrap,   usm_detach,
};

const halide_device_interface_t interface = {
    halide_device_malloc,  halide_device_free,         halide_device_sync,  halide_device_release,
    halide_copy_to_host,   halide_copy_to_device,      halide_device_and_host_malloc,
    halide_device_and_host_free, halide_buffer_copy,   halide_device_crop,  halide_device_slice,
    halide_device_release_crop,  halide_device_wrap_native, halide_device_detach_native, nullptr, &impl,
};

const halide_device_interface_t *iface() { return &interface; }

int usm_malloc(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_device_malloc_failed;
  if (buf->device) return 0;
  size_t size = buf->size_in_bytes();
  if (!size) size = 1;
  void *p = nullptr;
  auto it = q->pool.lower_bound(size);
  if (it != q->pool.end() && it->first <= 2 * size) {
    p = it->second;
    q->pooled -= it->first;
    q->pool.erase(it);
  } else {
    p = api.malloc_device(size, uc);
    if (!p) {
      report(uc, "USM device allocation of " + std::to_string(size) + " bytes failed");
      return halide_error_code_device_malloc_failed;
    }
    n_mallocs++;
    allocations[p] = Allocation{uc, size, q->owned};
  }
  buf->device = reinterpret_cast<uint64_t>(p);
  buf->device_interface = &interface;
  return 0;
}

int usm_free(void *uc, halide_buffer_t *buf) {
  std::lock_guard<std::mutex> g(lock);
  void *p = reinterpret_cast<void *>(buf->device);
  auto it = allocations.find(p);
  if (it != allocations.end()) {  // ours: keep it for the next allocation on the same queue
    auto qi = queues.find(it->second.queue);
    if (qi != queues.end() && qi->second.owned == it->second.owned) {
      qi->second.pool.emplace(it->second.size, p);
      qi->second.pooled += it->second.size;
      if (qi->second.pooled > pool_limit) release_pool(qi->second);
    } else {  // its queue was replaced: free now
      api.queue_wait(it->second.owned);
      api.free_with_queue(p, it->second.owned);
      allocations.erase(it);
      n_frees++;
    }
  }  // not ours (a torch tensor): never freed here
  buf->device = 0;
  buf->device_interface = nullptr;
  return 0;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ setup and introspection (ctypes)
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
  return 0;
}

const char *hx_usm_init_error() { return init_error.c_str(); }

void hx_usm_configure(int sub_group, uint64_t pool_limit_bytes) {
  sub_group_size = sub_group;
  pool_limit = pool_limit_bytes;
}

// launches, copies to host, copies to device, USM allocations, USM frees, program builds, SPIR-V modules
// loaded, SPIR-V modules the device refused (their source was built instead)
void hx_usm_counters(uint64_t out[8]) {
  out[0] = n_launches;
  out[1] = n_to_host;
  out[2] = n_to_device;
  out[3] = n_mallocs;
  out[4] = n_frees;
  out[5] = n_builds;
  out[6] = n_binary_loads;
  out[7] = n_binary_rejects;
}

// The OpenCL C that bundle_for builds (or looks up SPIR-V for) from Halide's source `src`, for `sub_group`:
// the one definition of those edits, used ahead of launch by halide_xpu/device_binary.py. Valid until the
// calling thread's next call.
const char *hx_usm_prepare_source(const char *src, int sub_group) {
  thread_local std::string out;
  out = prepare_source(src, sub_group);
  return out.c_str();
}

// Registers the SPIR-V module built from the prepared OpenCL C `src`; kernel objects with that source load it
// instead of building the source (programs already built stay as they are); size 0 forgets the module.
void hx_usm_set_spirv(const char *src, const uint8_t *spirv, size_t size) {
  std::lock_guard<std::mutex> g(lock);
  if (size) spirv_modules[src] = std::vector<uint8_t>(spirv, spirv + size);
  else spirv_modules.erase(src);
}

// 0 when `ptr` is USM memory of the queue's context; else reports which argument is wrong.
int hx_usm_check_pointer(void *queue, const void *ptr, const char *arg) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(queue);
  if (!q) return halide_error_code_device_interface_no_device;
  if (api.pointer_type(ptr, q->context) == kUsmUnknown) {
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

void hx_usm_release_all() { usm_release(nullptr); }

// ------------------------------------------------------------------ the halide_opencl_* replacements
const halide_device_interface_t *hx_usm_device_interface() { return &interface; }

int hx_usm_initialize_kernels(void *uc, void **state_ptr, const char *src, int size) {
  std::lock_guard<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_generic_error;
  if (!*state_ptr) {
    Module *m = new Module();
    m->source.assign(src, size > 0 && src[size - 1] == 0 ? size - 1 : size);
    *state_ptr = m;
  }
  return bundle_for(uc, static_cast<Module *>(*state_ptr), q) ? 0 : halide_error_code_generic_error;
}

void hx_usm_finalize_kernels(void *, void *) {}  // programs stay cached for the process

int hx_usm_run(void *uc, void *state_ptr, const char *entry, int bx, int by, int bz, int tx, int ty, int tz,
               int shared_mem_bytes, size_t arg_sizes[], void *args[], int8_t arg_is_buffer[]) {
  std::unique_lock<std::mutex> g(lock);
  QueueInfo *q = queue_info(uc);
  if (!q) return halide_error_code_device_run_failed;
  Module *m = static_cast<Module *>(state_ptr);
  Ref kb = bundle_for(uc, m, q);
  if (!kb) return halide_error_code_device_run_failed;
  auto kkey = std::make_pair(kb, entry);
  auto kit = m->kernels.find(kkey);
  if (kit == m->kernels.end()) {
    Ref ref = api.bundle_get_kernel(kb, entry);
    if (!ref) {
      report(uc, std::string("kernel ") + entry + " not found in its program");
      return halide_error_code_device_run_failed;
    }
    kit = m->kernels.emplace(kkey, Kernel{ref, api.kernel_num_args(ref), api.kernel_max_wg(ref)}).first;
  }
  const Kernel kernel = kit->second;
  size_t wg = size_t(tx) * ty * tz;
  size_t limit = kernel.max_wg && kernel.max_wg < q->max_wg ? kernel.max_wg : q->max_wg;
  if (wg > limit) {
    report(uc, std::string("kernel ") + entry + ": work-group of " + std::to_string(wg) + " exceeds the limit (" +
                   std::to_string(limit) + ")");
    return halide_error_code_device_run_failed;
  }
  g.unlock();
  int n = 0;
  while (arg_sizes[n]) n++;
  std::vector<void *> values(n + 1);
  std::vector<int> types(n + 1);
  LocalAccessor shared;
  for (int i = 0; i < n; i++) {
    if (arg_is_buffer[i]) {
      values[i] = reinterpret_cast<void *>(*static_cast<uint64_t *>(args[i]));
      types[i] = kVoidPtr;
    } else {
      values[i] = args[i];
      switch (arg_sizes[i]) {
        case 1: types[i] = kInt8; break;
        case 2: types[i] = kInt16; break;
        case 4: types[i] = kInt32; break;
        case 8: types[i] = kInt64; break;
        default:
          report(uc, std::string("kernel ") + entry + ": unsupported scalar argument size " + std::to_string(arg_sizes[i]));
          return halide_error_code_device_run_failed;
      }
    }
  }
  // Halide's OpenCL kernels end with one `__local` parameter for all shared memory, unless prepare_source
  // dropped it as unused; sized by hx_local_bytes.
  size_t nargs = n;
  if (kernel.num_args > size_t(n)) {
    shared = LocalAccessor{1, 1 /* uint8 */, size_t(hx_local_bytes(shared_mem_bytes)), 1, 1};
    values[n] = &shared;
    types[n] = kLocalAccessor;
    nargs = n + 1;
  }
  // SYCL's last dimension is OpenCL's first: reverse Halide's (x, y, z).
  const size_t local[3] = {size_t(tz), size_t(ty), size_t(tx)};
  const size_t global[3] = {size_t(bz) * tz, size_t(by) * ty, size_t(bx) * tx};
  Ref ev = api.submit(kernel.ref, uc, values.data(), types.data(), nargs, global, local, 3, nullptr, 0);
  if (!ev) {
    std::string detail;
    for (int i = 0; i < n; i++) detail += " " + std::to_string(types[i]) + "/" + std::to_string(arg_sizes[i]);
    report(uc, std::string("submitting kernel ") + entry + " failed (global " + std::to_string(global[2]) + "x" +
                   std::to_string(global[1]) + "x" + std::to_string(global[0]) + ", work-group " + std::to_string(tx) +
                   "x" + std::to_string(ty) + "x" + std::to_string(tz) + ", argument types/sizes" + detail + ")");
    return halide_error_code_device_run_failed;
  }
  api.event_delete(ev);
  n_launches++;
  return 0;
}

}  // extern "C"
