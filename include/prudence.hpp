// prudence.hpp: C++ wrappers over <prudence.h>.
//
//   prd::cache          RAII owner of a prd_cache_t (move-only); alloc/free raw buffers
//   prd::typed_cache<T> a cache of T: create(args...) constructs a T in a cache buffer,
//                       destroy(p) runs ~T() and gives the buffer back
//   prd::cache_allocator<T>  a standard-library allocator: single objects (the nodes of
//                       std::map, std::list, ...) come from one process-wide cache per
//                       object size and alignment (prd_node_cache: the same in every shared
//                       library, never destroyed, so global containers may outlive main);
//                       arrays (std::vector growth) and objects aligned beyond 4096 bytes
//                       from aligned operator new
//
// Errors: prd::cache's constructor throws std::bad_alloc when prd_cache_create fails
// (bad arguments or no memory); alloc() returns nullptr like prd_cache_alloc.
#ifndef PRUDENCE_HPP
#define PRUDENCE_HPP

// C++17 (if constexpr, aligned operator new); under an older standard the #error is the one
// message, the rest skipped.  MSVC says the standard in _MSVC_LANG (its __cplusplus is 199711L
// without /Zc:__cplusplus).
#if defined(_MSVC_LANG) ? _MSVC_LANG < 201703L : __cplusplus < 201703L
#error "prudence.hpp needs C++17 or later (-std=c++17); C++11/14 code can use <prudence.h>"
#else

#include <prudence.h>

#include <cstddef>
#include <new>
#include <utility>

namespace prd {

class cache {
public:
  cache(const char *name, std::size_t size, std::size_t align = 0, prd_ctor_fn *ctor = nullptr,
        prd_dtor_fn *dtor = nullptr, prd_reclaim_fn *reclaim = nullptr, void *priv = nullptr,
        prd_vmem_t *source = nullptr, int cflags = 0)
      : cp_(prd_cache_create(name, size, align, ctor, dtor, reclaim, priv, source, cflags))
  {
    if (cp_ == nullptr)
      throw std::bad_alloc();
  }
  cache(const cache &) = delete;
  cache &operator=(const cache &) = delete;
  cache(cache &&o) noexcept : cp_(std::exchange(o.cp_, nullptr)) {}
  cache &operator=(cache &&o) noexcept
  {
    if (this != &o) {
      reset();
      cp_ = std::exchange(o.cp_, nullptr);
    }
    return *this;
  }
  ~cache() { reset(); }

  void *alloc(int flags = PRD_SLEEP) noexcept { return prd_cache_alloc(cp_, flags); }
  void free(void *buf) noexcept { prd_cache_free(cp_, buf); }
  void reap() noexcept { prd_cache_reap(cp_); }
  prd_cache_t *get() const noexcept { return cp_; }

private:
  void reset() noexcept
  {
    if (cp_ != nullptr)
      prd_cache_destroy(cp_);
    cp_ = nullptr;
  }
  prd_cache_t *cp_;
};

// A cache of T: create() allocates a buffer and constructs a T in it with the given
// arguments; destroy() runs ~T() and returns the buffer.  (The cache's own constructor /
// destructor hooks are for state kept between uses; C++ objects are built per use here.)
template <typename T> class typed_cache {
public:
  explicit typed_cache(const char *name, int cflags = 0)
      : cache_(name, sizeof(T), alignof(T), nullptr, nullptr, nullptr, nullptr, nullptr, cflags)
  {
  }
  template <typename... Args> T *create(Args &&...args)
  {
    void *buf = cache_.alloc();
    if (buf == nullptr)
      throw std::bad_alloc();
    try {
      return new (buf) T(std::forward<Args>(args)...);
    } catch (...) {
      cache_.free(buf);
      throw;
    }
  }
  void destroy(T *obj) noexcept
  {
    if (obj == nullptr)
      return;
    obj->~T();
    cache_.free(obj);
  }
  prd::cache &raw() noexcept { return cache_; }

private:
  prd::cache cache_;
};

namespace detail {
// The process-wide cache for nodes of this size and alignment (prd_node_cache: one per
// process, never destroyed, so a node may be freed by another shared library or by a
// destructor that runs at exit).  Each copy of this function (one per shared library with
// hidden visibility) keeps only the pointer, which every copy agrees on.
inline prd_cache_t *node_cache_lookup(std::size_t size, std::size_t align)
{
  prd_cache_t *cp = prd_node_cache(size, align);
  if (cp == nullptr)
    throw std::bad_alloc();
  return cp;
}
template <std::size_t Size, std::size_t Align> prd_cache_t *node_cache()
{
  static prd_cache_t *const cp = node_cache_lookup(Size, Align);
  return cp;
}
// Caches align to at most a page; 4096 is the smallest page size, so a node aligned beyond
// it goes to operator new on every system.
constexpr std::size_t node_align_max = 4096;
} // namespace detail

template <typename T> class cache_allocator {
public:
  using value_type = T;
  cache_allocator() noexcept = default;
  template <typename U> cache_allocator(const cache_allocator<U> &) noexcept {}

  T *allocate(std::size_t n)
  {
    if constexpr (alignof(T) <= detail::node_align_max) {
      if (n == 1) {
        void *p = prd_cache_alloc(detail::node_cache<sizeof(T), alignof(T)>(), PRD_SLEEP);
        if (p == nullptr)
          throw std::bad_alloc();
        return static_cast<T *>(p);
      }
    }
    if (n > static_cast<std::size_t>(-1) / sizeof(T))
      throw std::bad_array_new_length();
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
  }
  void deallocate(T *p, std::size_t n) noexcept
  {
    if constexpr (alignof(T) <= detail::node_align_max) {
      if (n == 1) {
        prd_cache_free(detail::node_cache<sizeof(T), alignof(T)>(), p);
        return;
      }
    }
    ::operator delete(p, std::align_val_t(alignof(T)));
  }
  template <typename U> bool operator==(const cache_allocator<U> &) const noexcept { return true; }
  template <typename U> bool operator!=(const cache_allocator<U> &) const noexcept { return false; }
};

} // namespace prd

#endif // C++17
#endif // PRUDENCE_HPP
