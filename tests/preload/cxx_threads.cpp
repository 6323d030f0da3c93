// A multi-threaded C++ program for the preload tests: std::thread workers fill and drain
// std::map and std::string/std::vector objects (operator new/delete of every size), hand
// maps to each other through a mutex-protected queue, and check every value.  With
// PRD_EXPECT_PRELOAD set it also checks that libprudence-malloc is the allocator in use.
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static std::mutex qlock;
static std::vector<std::unique_ptr<std::map<int, std::string>>> queue;

static void worker(int id, int rounds, int *bad)
{
  for (int r = 0; r < rounds; r++) {
    auto m = std::make_unique<std::map<int, std::string>>();
    for (int i = 0; i < 2000; i++)
      (*m)[i * 7 + id] = std::string(static_cast<size_t>(i % 97 + 1), static_cast<char>('a' + i % 26));
    std::vector<std::vector<int>> vs;
    for (int i = 0; i < 200; i++)
      vs.emplace_back(static_cast<size_t>(i * 13 % 500), i);
    for (auto &v : vs)
      for (int x : v)
        if (x != static_cast<int>(&v - &vs[0]))
          ++*bad;
    std::unique_ptr<std::map<int, std::string>> other;
    {
      std::lock_guard<std::mutex> g(qlock);
      queue.push_back(std::move(m));
      if (queue.size() > 2) {
        other = std::move(queue.front());
        queue.erase(queue.begin());
      }
    }
    if (other)   // freed by this thread, allocated by another
      for (auto &kv : *other)
        if (kv.second.size() != static_cast<size_t>((kv.first / 7) % 97 + 1) && kv.first % 7 == 0)
          ++*bad;
  }
}

int main()
{
  if (std::getenv("PRD_EXPECT_PRELOAD") != nullptr) {
    using usable_fn = size_t (*)(void *);
    auto prd_usable = reinterpret_cast<usable_fn>(dlsym(RTLD_DEFAULT, "prd_malloc_usable_size"));
    void *p = std::malloc(17);
    std::string *s = new std::string(100, 'q');
    if (prd_usable == nullptr || prd_usable(p) != 32 || prd_usable(s) < sizeof(*s)) {
      std::fprintf(stderr, "libprudence-malloc is not the allocator in use\n");
      return 2;
    }
    delete s;
    std::free(p);
  }
  const int nthreads = 6;
  std::vector<std::thread> ts;
  std::vector<int> bad(nthreads, 0);
  for (int i = 0; i < nthreads; i++)
    ts.emplace_back(worker, i, 40, &bad[static_cast<size_t>(i)]);
  for (auto &t : ts)
    t.join();
  queue.clear();
  int total = 0;
  for (int b : bad)
    total += b;
  std::printf("%s %d\n", total == 0 ? "ok" : "BAD", total);
  return total == 0 ? 0 : 1;
}
