# An allocation-heavy Python workload for the preload tests: dicts, lists, strings and
# bytes of every size class and beyond, built, mutated and dropped; the results are checked.
import random

rng = random.Random(7)
total = 0
for rnd in range(6):
    d = {}
    for i in range(60000):
        d[i] = "x" * rng.randrange(1, 300)
    big = [bytes(rng.randrange(1000, 200000)) for _ in range(60)]
    lst = [[j] * rng.randrange(0, 50) for j in range(20000)]
    s = sum(len(v) for v in d.values()) + sum(len(b) for b in big) + sum(len(l) for l in lst)
    for i in range(0, 60000, 2):
        del d[i]
    text = ",".join(str(k) for k in d)
    assert text.count(",") == len(d) - 1
    total += s
    huge = bytearray(8 << 20)
    huge[-1] = 1
    assert sum(huge[-10:]) == 1
print("ok", total)
