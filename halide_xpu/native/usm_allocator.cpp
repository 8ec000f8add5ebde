// torch CPU allocator over SYCL USM shared memory: while pushed, every CPU tensor torch allocates (inputs,
// Inductor's outputs and temporaries) lives in USM of one SYCL queue's context, as XPU tensors do on a
// real Intel GPU. Used only by the sycl emulation target (halide_xpu/usm.py).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <dlfcn.h>

#include <mutex>
#include <new>
#include <unordered_map>

namespace {

typedef void *(*aligned_alloc_shared_t)(size_t alignment, size_t size, void *queue);
typedef void (*free_with_queue_t)(void *ptr, void *queue);
typedef void *(*queue_copy_t)(void *queue);

aligned_alloc_shared_t usm_alloc = nullptr;
free_with_queue_t usm_free = nullptr;
queue_copy_t queue_copy = nullptr;
std::mutex lock;
std::unordered_map<void *, void *> owner;  // pointer -> queue it was allocated on

void release(void *ptr) {
  if (!ptr) return;
  void *queue;
  {
    std::lock_guard<std::mutex> g(lock);
    auto it = owner.find(ptr);
    if (it == owner.end()) return;
    queue = it->second;
    owner.erase(it);
  }
  usm_free(ptr, queue);
}

struct UsmSharedAllocator final : c10::Allocator {
  void *queue;
  explicit UsmSharedAllocator(void *q) : queue(q) {}

  c10::DataPtr allocate(size_t n) override {
    void *p = nullptr;
    if (n) {
      p = usm_alloc(128, n, queue);  // KernelMeta.pointer_alignment of the sycl target
      if (!p) throw std::bad_alloc();
      std::lock_guard<std::mutex> g(lock);
      owner[p] = queue;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void *dest, const void *src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

extern "C" {

int hx_usm_alloc_init(const char *dpctl_library) {
  void *lib = dlopen(dpctl_library, RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return -1;
  usm_alloc = (aligned_alloc_shared_t)dlsym(lib, "DPCTLaligned_alloc_shared");
  usm_free = (free_with_queue_t)dlsym(lib, "DPCTLfree_with_queue");
  queue_copy = (queue_copy_t)dlsym(lib, "DPCTLQueue_Copy");
  return usm_alloc && usm_free && queue_copy ? 0 : -2;
}

// Makes USM shared memory of `queue`'s context torch's CPU allocator; returns the allocator it replaced.
void *hx_usm_alloc_push(void *queue) {
  void *previous = c10::GetCPUAllocator();
  auto *a = new UsmSharedAllocator(queue_copy(queue));  // kept for the process: tensors may outlive the scope
  c10::SetCPUAllocator(a, /*priority=*/200);
  return previous;
}

void hx_usm_alloc_pop(void *previous) { c10::SetCPUAllocator(static_cast<c10::Allocator *>(previous), 200); }

unsigned long long hx_usm_alloc_live() {
  std::lock_guard<std::mutex> g(lock);
  return owner.size();
}
}
