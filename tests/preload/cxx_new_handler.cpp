// The nothrow forms of operator new under LD_PRELOAD=libprudence-malloc.so behave as the
// standard's default: as if they called the throwing form, so the new_handler runs while
// one is installed and nullptr comes back where the throwing form would throw.  A request
// no allocator can meet makes every attempt fail.  With PRD_EXPECT_PRELOAD set it also
// checks that their memory is libprudence-malloc's.
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

static int calls;
static void handler_once()   // as a handler that frees what it can, then gives up
{
  if (++calls == 2)
    std::set_new_handler(nullptr);
}
static void handler_throws()
{
  ++calls;
  throw std::bad_alloc();
}

static int check(const char *what, void *p, int want_calls)
{
  if (p == nullptr && calls == want_calls)
    return 0;
  std::fprintf(stderr, "%s: %p, new_handler called %d times (want nullptr, %d)\n", what, p,
               calls, want_calls);
  return 1;
}

int main()
{
  const std::size_t huge = SIZE_MAX / 2;
  const std::align_val_t al{64};
  int bad = 0;
  calls = 0;
  std::set_new_handler(handler_once);
  bad += check("new(nothrow)", ::operator new(huge, std::nothrow), 2);
  calls = 0;
  std::set_new_handler(handler_once);
  bad += check("new[](nothrow)", ::operator new[](huge, std::nothrow), 2);
  calls = 0;
  std::set_new_handler(handler_once);
  bad += check("new(align, nothrow)", ::operator new(huge, al, std::nothrow), 2);
  calls = 0;
  std::set_new_handler(handler_throws);
  bad += check("new[](align, nothrow), throwing handler", ::operator new[](huge, al, std::nothrow), 1);
  std::set_new_handler(nullptr);

  void *p = ::operator new(100, std::nothrow);
  void *q = ::operator new[](100, al, std::nothrow);
  if (p == nullptr || q == nullptr || reinterpret_cast<std::uintptr_t>(q) % 64 != 0)
    bad++;
  if (std::getenv("PRD_EXPECT_PRELOAD") != nullptr) {
    using usable_fn = size_t (*)(void *);
    auto prd_usable = reinterpret_cast<usable_fn>(dlsym(RTLD_DEFAULT, "prd_malloc_usable_size"));
    if (prd_usable == nullptr || prd_usable(p) != 112 || prd_usable(q) < 100) {
      std::fprintf(stderr, "nothrow operator new's memory is not libprudence-malloc's\n");
      bad++;
    }
  }
  ::operator delete(p);
  ::operator delete[](q, al);
  std::printf("%s - nothrow operator new runs the new_handler\n", bad ? "not ok" : "ok");
  return bad ? 1 : 0;
}
