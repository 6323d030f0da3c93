// C++ wrappers (include/prudence.hpp): RAII cache, typed cache, and the standard-library
// allocator adaptor with std::vector and std::map.
#include <prudence.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

static int failures;
#define EXPECT(c)                                                                   \
  do {                                                                              \
    if (!(c)) {                                                                     \
      std::fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);           \
      failures++;                                                                   \
    }                                                                               \
  } while (0)

struct tracked {
  static int live;
  std::string name;
  int value;
  tracked(std::string n, int v) : name(std::move(n)), value(v) { live++; }
  ~tracked() { live--; }
};
int tracked::live;

static void test_raii_cache()
{
  prd::cache c("cpp.raw", 48);
  void *a = c.alloc();
  void *b = c.alloc();
  EXPECT(a != nullptr && b != nullptr && a != b);
  c.free(a);
  c.free(b);
  prd::cache moved(std::move(c));
  EXPECT(moved.get() != nullptr && c.get() == nullptr);
  bool threw = false;
  try {
    prd::cache bad("cpp.bad", 0);   // size 0 is invalid: the constructor throws
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  EXPECT(threw);
}

static void test_typed_cache()
{
  prd::typed_cache<tracked> tc("cpp.tracked");
  std::vector<tracked *> v;
  for (int i = 0; i < 1000; i++)
    v.push_back(tc.create("obj" + std::to_string(i), i));
  EXPECT(tracked::live == 1000);
  for (int i = 0; i < 1000; i++)
    EXPECT(v[i]->value == i && v[i]->name == "obj" + std::to_string(i));
  for (tracked *t : v)
    tc.destroy(t);
  EXPECT(tracked::live == 0);
}

static void test_allocator_with_containers()
{
  std::map<int, std::string, std::less<int>,
           prd::cache_allocator<std::pair<const int, std::string>>> m;
  for (int i = 0; i < 10000; i++)
    m[i] = std::to_string(i * 7);
  EXPECT(m.size() == 10000);
  for (int i = 0; i < 10000; i += 97)
    EXPECT(m[i] == std::to_string(i * 7));
  for (int i = 0; i < 10000; i += 2)
    m.erase(i);
  EXPECT(m.size() == 5000);

  std::vector<long, prd::cache_allocator<long>> vec;
  for (long i = 0; i < 100000; i++)
    vec.push_back(i);
  long sum = 0;
  for (long x : vec)
    sum += x;
  EXPECT(sum == 100000L * 99999L / 2);
}

// A container destroyed at exit, after main returns: its nodes go back to a node cache that
// must still be alive then (node caches are never destroyed).  main fills it after the tests
// and turns abort_on_error back on, so a free into a destroyed cache ends the run.
using exit_map_t = std::map<int, long, std::less<int>, prd::cache_allocator<std::pair<const int, long>>>;
static exit_map_t exit_map;

// Node caches: one per (size, alignment), the one prd_node_cache gives, with a name that
// fits in PRD_CACHE_NAME_MAX.
static void test_node_caches()
{
  struct big { char b[1000000]; };
  prd_cache_t *cp = prd::detail::node_cache<sizeof(big), alignof(big)>();
  EXPECT(cp != nullptr && cp == prd_node_cache(sizeof(big), alignof(big)));
  prd_cache_t *c24x8 = prd::detail::node_cache<24, 8>();
  prd_cache_t *c24x4 = prd::detail::node_cache<24, 4>();
  EXPECT(c24x8 == prd_node_cache(24, 8) && c24x8 != c24x4);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;   // no warning in C++ (-Wextra -Werror)
  EXPECT(prd_cache_stats(cp, &st) == 0);
  EXPECT(std::strcmp(st.name, "prd::node<1000000,1>") == 0);
  EXPECT(prd_node_cache(sizeof(long), 3) == nullptr);   // not a power of two: reported
}

// Objects aligned beyond a page: no cache can hold them, so single objects come from aligned
// operator new too, without a report and with their alignment.
static void test_overaligned()
{
  struct alignas(8192) page2 { char b[8192]; };
  std::map<int, page2, std::less<int>, prd::cache_allocator<std::pair<const int, page2>>> m;
  for (int i = 0; i < 8; i++)
    m[i].b[0] = static_cast<char>(i);
  for (auto &kv : m)
    EXPECT(reinterpret_cast<std::uintptr_t>(&kv.second) % 8192 == 0 && kv.second.b[0] == kv.first);
  prd::cache_allocator<page2> a;
  page2 *p = a.allocate(1);
  EXPECT(reinterpret_cast<std::uintptr_t>(p) % 8192 == 0);
  a.deallocate(p, 1);
}

int main()
{
  prd_option_set("abort_on_error", "0");
  int passed = 0, failed = 0;
  struct { const char *name; void (*fn)(); } tests[] = {
    { "test_raii_cache", test_raii_cache },
    { "test_typed_cache", test_typed_cache },
    { "test_allocator_with_containers", test_allocator_with_containers },
    { "test_node_caches", test_node_caches },
    { "test_overaligned", test_overaligned },
  };
  for (auto &t : tests) {
    failures = 0;
    t.fn();
    std::printf("%s - %s\n", failures ? "not ok" : "ok", t.name);
    (failures ? failed : passed)++;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  for (int i = 0; i < 1000; i++)
    exit_map[i] = i;
  prd_option_set("abort_on_error", "1");
  return failed ? 1 : 0;
}
