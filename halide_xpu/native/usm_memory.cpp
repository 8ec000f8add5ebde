// USM memory of the Halide device API over SYCL: allocations (pooled per in-order queue), host<->device copies,
// crops and slices; the halide_device_interface_t that kernel objects of the sycl target use.
#include <cstring>

#include "usm_state.h"

namespace hx_usm {
namespace {

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
    use_module,        release_module,      usm_malloc,          usm_free,   usm_sync, release_all,
    usm_copy_to_host,  usm_copy_to_device,  usm_and_host_malloc, usm_and_host_free,    usm_buffer_copy,
    usm_crop,          usm_slice,           usm_release_crop,    usm_wrap,   usm_detach,
};

const halide_device_interface_t interface = {
    halide_device_malloc,  halide_device_free,         halide_device_sync,  halide_device_release,
    halide_copy_to_host,   halide_copy_to_device,      halide_device_and_host_malloc,
    halide_device_and_host_free, halide_buffer_copy,   halide_device_crop,  halide_device_slice,
    halide_device_release_crop,  halide_device_wrap_native, halide_device_detach_native, nullptr, &impl,
};

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

const halide_device_interface_t *iface() { return &interface; }

}  // namespace hx_usm

extern "C" const halide_device_interface_t *hx_usm_device_interface() { return hx_usm::iface(); }
